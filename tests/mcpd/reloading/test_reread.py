"""A reload's config read again: refused whole when it cannot be served, keys that take
a restart named, the socket listening now kept."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest

from mcpd.config.loading.load import load
from mcpd.config.tables.model import CONFIG_ERROR, Config, NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.reloading.reread import Rereader, unmatched_profile
from mcpd.starting.prestart import state_found
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


def write(path: Path, sock: Path, extra: str = "", profile_tools: str = "") -> Path:
    text = f'[daemon]\nsocket = "{sock}"\n{extra}\n'
    text += '\n[servers.git]\ncommand = "git-mcp"\n'
    text += '\n[servers.fs]\ncommand = "fs-mcp"\n'
    if profile_tools:
        text += '\n[profiles.dev]\nservers = ["git"]\n'
        text += f'\n[profiles.dev.tools]\nallow = ["{profile_tools}"]\n'
    path.write_text(text)
    return path


def listed(*names: str) -> Catalog:
    """A tool table where the server ``git`` has listed ``names``."""
    table = Catalog(NamingConfig())
    schema = msgspec.Raw(b'{"type": "object"}')
    table.update("git", [mcp.Tool(name=n, inputSchema=schema) for n in names])
    return table


def rereader(path: Path | None, started: Config, table: Catalog | None = None) -> Rereader:
    file = None if path is None else str(path)
    return Rereader(file, started, table or listed("status"), Config.socket_path)


def test_keys_that_take_a_restart_are_named_and_the_socket_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    read = rereader(path, started)
    assert read.read(started, started.socket_path()).restart == []
    write(path, tmp_path / "elsewhere.sock", extra='http_listen = "127.0.0.1:8111"')
    with caplog.at_level(logging.WARNING, logger="mcpd"):
        again = read.read(started, started.socket_path())
    assert again.restart == ["daemon.socket", "daemon.http_listen"]
    assert again.config.socket_path() == str(tmp_path / "mcpd.sock")
    assert again.config.daemon.http_listen == "127.0.0.1:8111"
    warned = [r.getMessage() for r in caplog.records]
    assert "daemon.socket changed; that takes a restart, not a reload" in warned
    # Compared with what mcpd started with, not with the config read last: a second
    # reload still names what is waiting for a restart.
    assert read.read(again.config, started.socket_path()).restart == [
        "daemon.socket",
        "daemon.http_listen",
    ]


def test_the_state_directory_mcpd_keeps_stays_until_a_restart(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock", f'state_dir = "{tmp_path}/link"')
    started = state_found(load(str(path)))
    found = str(tmp_path.resolve() / "real")
    assert started.daemon.state_dir == found
    # As named, for the sandboxes to check the links on its way; once found, kept.
    assert started.state_path == state_found(started).state_path == f"{tmp_path}/link"
    read = rereader(path, started)
    assert read.read(started, started.socket_path()).restart == []  # the same place
    write(path, tmp_path / "mcpd.sock", f'state_dir = "{tmp_path}/elsewhere"')
    again = read.read(started, started.socket_path())
    assert again.restart == ["daemon.state_dir"]
    # The servers' homes, and what their sandboxes hide, stay where mcpd keeps its state.
    assert again.config.daemon.state_dir == found
    assert again.config.state_path == f"{tmp_path}/link"


def test_a_config_that_does_not_load_is_refused_naming_its_key(tmp_path: Path) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    path.write_text(path.read_text() + "\n[servers.git.nonsense]\n")
    with pytest.raises(rpc.RPCError) as refused:
        rereader(path, started).read(started, started.socket_path())
    assert refused.value.message.startswith("config rejected: ")
    assert isinstance(refused.value.data, dict)
    assert "servers.git" in refused.value.data[CONFIG_ERROR]


def test_without_a_config_file_there_is_nothing_to_read_again(tmp_path: Path) -> None:
    started = load(str(write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")))
    with pytest.raises(rpc.RPCError, match="started without a config file"):
        rereader(None, started).read(started, started.socket_path())


def test_a_profile_matching_no_listed_tool_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    write(path, tmp_path / "mcpd.sock", profile_tools="push")
    with pytest.raises(rpc.RPCError) as refused:
        rereader(path, started, listed("status", "log")).read(started, started.socket_path())
    assert isinstance(refused.value.data, dict)
    assert refused.value.data[CONFIG_ERROR].startswith("profiles.dev.tools")
    write(path, tmp_path / "mcpd.sock", profile_tools="log")
    good = rereader(path, started, listed("status", "log")).read(started, started.socket_path())
    assert list(good.config.profiles) == ["dev"]


def test_a_server_the_reload_changes_is_not_judged_by_its_old_list(tmp_path: Path) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    old = load(str(path))
    path.write_text(
        path.read_text().replace('"git-mcp"', '"git-mcp-2"')
        + '\n[profiles.dev]\nservers = ["git"]\n\n[profiles.dev.tools]\nallow = ["push"]\n'
    )
    new = load(str(path))
    table = listed("status")
    assert unmatched_profile(new, table, old) is None  # git's new list is not in yet
    problem = unmatched_profile(new, table)  # at start-up, every list counts
    assert problem is not None and "matches no tool of git" in str(problem)


def test_the_settings_a_reload_puts_in_force_besides_the_servers_are_named(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    read = rereader(path, started)
    assert read.read(started, started.socket_path()).settings == []
    rules = '\n[[policy]]\ntools = ["git__*"]\naction = "deny"\n'
    write(path, tmp_path / "mcpd.sock", extra="call_timeout = 5", profile_tools="status")
    path.write_text(path.read_text() + rules)
    again = read.read(started, started.socket_path())
    assert again.settings == ["daemon.call_timeout", "profiles", "policy"]
    assert again.restart == []


def test_a_key_that_waits_for_a_restart_is_not_said_to_be_in_force(tmp_path: Path) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    read = rereader(path, started)
    write(path, tmp_path / "elsewhere.sock", extra='http_listen = "127.0.0.1:8111"')
    again = read.read(started, started.socket_path())
    assert again.restart == ["daemon.socket", "daemon.http_listen"]
    assert again.settings == []


@pytest.mark.parametrize(
    ("key", "value", "base"),
    [
        ("socket_mode", '"0660"', ""),
        ("http_origins", '["https://app.example"]', 'http_listen = "127.0.0.1:8111"'),
        ("state_dir", '"/var/tmp/elsewhere"', ""),
    ],
)
def test_every_key_read_only_at_start_waits_for_a_restart(
    tmp_path: Path, key: str, value: str, base: str
) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock", extra=base)
    started = load(str(path))
    read = rereader(path, started)
    write(path, tmp_path / "mcpd.sock", extra=f"{base}\n{key} = {value}")
    again = read.read(started, started.socket_path())
    assert again.restart == [f"daemon.{key}"]
    assert again.settings == []


def test_a_config_made_writable_by_every_user_is_refused_and_the_old_one_stays(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "mcpd.toml", tmp_path / "mcpd.sock")
    started = load(str(path))
    path.chmod(0o666)
    with pytest.raises(rpc.RPCError) as refused:
        rereader(path, started).read(started, started.socket_path())
    assert refused.value.message.startswith("config rejected: ")
    assert "every user" in refused.value.message
