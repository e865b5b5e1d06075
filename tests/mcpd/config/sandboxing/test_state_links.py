"""A symbolic link on the way to mcpd's state directory or config file, in a directory
a sandboxed server may write, keeps that server from starting, with a reason naming
the link and the resolved path to put in the config; a link the server cannot change
(in a hidden directory, a read-only one, or for a server with no sandbox) does not."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.check_sandbox import sandbox_lines
from mcpd.config.loading.load import parse_config
from mcpd.config.sandboxing.per_server import sandbox_of
from mcpd.config.sandboxing.state_links import links_on_the_way
from mcpd.config.tables.model import Config
from transports.stdio.sandbox.host import probe
from transports.stdio.sandbox.plan import SandboxError, shortfall


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


def linked_home(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A home whose ``.local`` is a link into another disk, as a dotfiles setup has it."""
    home = tmp / "home"
    (tmp / "data" / "local" / "state" / "mcpd").mkdir(parents=True)
    home.mkdir()
    (home / ".local").symlink_to(tmp / "data" / "local")
    state_home = str(home / ".local" / "state")  # as for a user, whoever runs the test
    return home, {"HOME": str(home), "XDG_STATE_HOME": state_home, "PATH": "/usr/bin:/bin"}


def config_of(env: dict[str, str], source: str = "", **server: Any) -> Config:
    data = {"servers": {"s": {"command": "/bin/true", **server}}}
    return parse_config(data, env=env, source=source)


def test_the_links_on_the_way_are_found_in_order_through_links_in_links(tmp: Path) -> None:
    (tmp / "real" / "b").mkdir(parents=True)
    (tmp / "a").symlink_to("real")  # relative
    (tmp / "real" / "c").symlink_to(tmp / "real" / "b")  # absolute
    path = str(tmp / "a" / "c" / "missing" / "more")
    assert links_on_the_way(path) == [str(tmp / "a"), str(tmp / "real" / "c")]
    assert links_on_the_way(str(tmp / "real" / "b")) == []


def test_a_server_that_could_repoint_a_link_above_the_state_directory_does_not_start(
    tmp: Path,
) -> None:
    home, env = linked_home(tmp)
    config = config_of(env)
    sandbox = sandbox_of("s", config.servers["s"], config, env)
    assert sandbox.refused is not None
    assert f"mcpd's state directory {home}/.local/state/mcpd" in sandbox.refused
    assert f"symbolic link {home}/.local, in {home}," in sandbox.refused
    assert f'state_dir = "{tmp}/data/local/state/mcpd"' in sandbox.refused
    with pytest.raises(SandboxError, match="symbolic link"):
        shortfall(sandbox, probe())
    # check-config says so under the server.
    lines = sandbox_lines("s", config.servers["s"], config, env)
    assert any("cannot start" in line and f"{home}/.local" in line for line in lines), lines
    # The remedy: the resolved directory named in the config.
    state = {"state_dir": f"{tmp}/data/local/state/mcpd"}
    fixed = parse_config({"daemon": state, "servers": {"s": {"command": "/bin/true"}}}, env=env)
    assert sandbox_of("s", fixed.servers["s"], fixed, env).refused is None


def test_a_link_to_the_config_file_a_server_could_repoint_is_named_with_the_real_path(
    tmp: Path,
) -> None:
    (tmp / "dotfiles" / "mcpd").mkdir(parents=True)
    (tmp / "dotfiles" / "mcpd" / "config.toml").write_text("")
    (tmp / "conf").symlink_to(tmp / "dotfiles")
    env = {"HOME": str(tmp / "home"), "PATH": "/usr/bin:/bin"}
    config = config_of(env, source=str(tmp / "conf" / "mcpd" / "config.toml"))
    refused = sandbox_of("s", config.servers["s"], config, env).refused
    assert refused is not None and f"mcpd's config file {tmp}/conf/mcpd" in refused
    assert f"--config {tmp}/dotfiles/mcpd/config.toml" in refused


@pytest.mark.parametrize(
    "server",
    [{"sandbox": "off"}, {"sandbox": "strict"}],
)
def test_a_server_that_cannot_change_the_links_directory_starts(
    tmp: Path, server: dict[str, Any]
) -> None:
    # No sandbox trusts the server anyway; a strict one sees only its grants.
    _, env = linked_home(tmp)
    config = config_of(env, **server)
    assert sandbox_of("s", config.servers["s"], config, env).refused is None


def test_a_strict_server_granted_the_links_directory_does_not_start(tmp: Path) -> None:
    home, env = linked_home(tmp)
    config = config_of(env, sandbox="strict", write=[str(home)])
    assert sandbox_of("s", config.servers["s"], config, env).refused is not None
    config = config_of(env, sandbox="strict", read=[str(home)])
    assert sandbox_of("s", config.servers["s"], config, env).refused is None


def test_a_link_in_a_hidden_directory_is_out_of_the_servers_reach(tmp: Path) -> None:
    # ~/.ssh is hidden: a link there cannot be touched from inside.
    home = tmp / "home"
    (tmp / "keys" / "mcpd").mkdir(parents=True)
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "st").symlink_to(tmp / "keys")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    config = parse_config(
        {
            "daemon": {"state_dir": f"{home}/.ssh/st/mcpd"},
            "servers": {"s": {"command": "/bin/true"}},
        },
        env=env,
    )
    assert sandbox_of("s", config.servers["s"], config, env).refused is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link away")
def test_another_users_link_at_a_hidden_name_does_not_put_the_links_directory_out_of_reach(
    tmp: Path,
) -> None:
    """Their link points a name every sandbox hides at the home: it hides nothing, so
    the server could still repoint the home's link."""
    home, env = linked_home(tmp)
    (tmp / "run").mkdir()
    planted = tmp / "run" / f"tmux-{os.getuid()}"
    planted.symlink_to(home)
    os.lchown(planted, 4242, 4242)
    env["XDG_RUNTIME_DIR"] = str(tmp / "run")
    config = config_of(env)
    refused = sandbox_of("s", config.servers["s"], config, env).refused
    assert refused is not None and f"symbolic link {home}/.local, in {home}," in refused
