"""Replacing a host's config file: links followed one at a time and each judged, a host's
own write in the meantime kept, what cannot be written leaving no backup, the file's
bytes and line endings kept."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.hosts import hostconfig as hc
from mcpd.cli.hosts.hostfile import HostConfigError
from tests.support.system.peer_user import needs_root, peer_uid, shared_dir

BRIDGE = ["/usr/bin/mcpd", "bridge"]


def entry(key: str = "claude-code") -> hc.HostEntry:
    return hc.entry(key, bridge_argv=BRIDGE)


def backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.bak-*"))


# -- links --


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "target.json").write_text("{}")
    return home


@pytest.fixture
def others_dir() -> Iterator[Path]:
    """A folder of another user's (mode 0755), as /tmp/att would be."""
    folder = shared_dir()
    uid = peer_uid()
    os.chown(folder, uid, uid)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@needs_root
def test_a_link_in_another_users_folder_further_along_is_not_followed(
    home: Path, others_dir: Path
) -> None:
    """~/.claude.json -> /tmp/att/claude.json -> ~/target.json: the second link is
    the other user's to point anywhere."""
    theirs = others_dir / "claude.json"
    theirs.symlink_to(home / "target.json")
    os.lchown(theirs, peer_uid(), peer_uid())
    link = home / ".claude.json"
    link.symlink_to(theirs)
    with pytest.raises(HostConfigError, match=f"{others_dir} belongs to uid {peer_uid()}"):
        hc.write_host_config("claude-code", link, entry())
    assert (home / "target.json").read_text() == "{}" and backups(home) == []


def test_a_link_in_a_folder_every_user_can_write_further_along_is_not_followed(
    home: Path, tmp_path: Path
) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    (open_folder / "claude.json").symlink_to(home / "target.json")
    link = home / ".claude.json"
    link.symlink_to(open_folder / "claude.json")
    with pytest.raises(HostConfigError, match=f"{open_folder} can be written by every user"):
        hc.write_host_config("claude-code", link, entry())
    assert (home / "target.json").read_text() == "{}" and backups(home) == []


def test_a_link_in_a_folder_reached_through_a_link_is_judged_where_it_really_is(
    home: Path, tmp_path: Path
) -> None:
    """The second link's folder is named through a link of the user's: it is the real
    folder, every user's to write, that decides."""
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    (open_folder / "claude.json").symlink_to(home / "target.json")
    (home / "via").symlink_to(open_folder)
    link = home / ".claude.json"
    link.symlink_to("via/claude.json")
    with pytest.raises(HostConfigError, match="every user"):
        hc.write_host_config("claude-code", link, entry())
    assert (home / "target.json").read_text() == "{}"


def test_a_chain_of_the_users_own_links_is_followed_to_its_end(home: Path) -> None:
    (home / "dotfiles").mkdir()
    (home / "real").mkdir()
    (home / "real" / "claude.json").write_text('{"theme": "dark"}')
    (home / "dotfiles" / "claude.json").symlink_to("../real/claude.json")
    (home / "configs").symlink_to("dotfiles")
    link = home / ".claude.json"
    link.symlink_to("configs/claude.json")
    written = hc.write_host_config("claude-code", link, entry())
    assert written.path == home / "real" / "claude.json"
    assert link.is_symlink() and (home / "dotfiles" / "claude.json").is_symlink()
    after = json.loads((home / "real" / "claude.json").read_text())
    assert after["theme"] == "dark" and "mcpd" in after["mcpServers"]


def test_a_loop_of_links_is_refused_with_the_reason(home: Path) -> None:
    (home / "a.json").symlink_to("b.json")
    (home / "b.json").symlink_to("a.json")
    with pytest.raises(HostConfigError, match="too many symbolic links"):
        hc.write_host_config("claude-code", home / "a.json", entry())


# -- a host writing its file meanwhile --


def test_a_write_by_the_host_while_mcpd_merges_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"mcpServers": {}}')
    hosts_write = '{"mcpServers": {}, "theme": "light"}'
    merge = hc.merge
    seen: list[str] = []

    def merge_as_the_host_writes(key: str, existing: str, new: hc.HostEntry, **how: Any) -> str:
        seen.append(existing)
        if len(seen) == 1:
            path.write_text(hosts_write)  # Claude Code saves its state just then
        return merge(key, existing, new, **how)

    monkeypatch.setattr(hc, "merge", merge_as_the_host_writes)
    written = hc.write_host_config("gemini-cli", path, entry("gemini-cli"))
    after = json.loads(path.read_text())
    assert after["theme"] == "light" and "mcpd" in after["mcpServers"]
    assert written.backup is not None and written.backup.read_text() == hosts_write
    assert backups(tmp_path) == [written.backup]


def test_a_file_that_keeps_changing_is_left_to_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"mcpServers": {}}')
    merge = hc.merge
    writes = iter(range(1000))

    def merge_as_the_host_writes(key: str, existing: str, new: hc.HostEntry, **how: Any) -> str:
        path.write_text(json.dumps({"mcpServers": {}, "count": next(writes)}))
        return merge(key, existing, new, **how)

    monkeypatch.setattr(hc, "merge", merge_as_the_host_writes)
    with pytest.raises(HostConfigError, match="kept changing"):
        hc.write_host_config("gemini-cli", path, entry("gemini-cli"))
    assert "mcpd" not in path.read_text() and backups(tmp_path) == []


# -- what cannot be written --


def test_an_entry_that_cannot_be_written_leaves_no_backup(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "o3"\n')
    # A command whose name is not UTF-8, as Python reads such a path.
    new = hc.entry("codex", bridge_argv=["/opt/mcpd-\udcff/mcpd", "bridge"])
    with pytest.raises(HostConfigError, match="UTF-8"):
        hc.write_host_config("codex", path, new)
    assert path.read_text() == 'model = "o3"\n' and backups(tmp_path) == []


def test_a_lone_surrogate_in_the_file_is_written_back_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    before = '{\n  "title": "cut \\ud83d",\n  "mcpServers": {}\n}\n'
    path.write_text(before)
    written = hc.write_host_config("gemini-cli", path, entry("gemini-cli"))
    assert path.read_text().startswith('{\n  "title": "cut \\ud83d",\n')
    assert written.backup is not None and written.backup.read_text() == before


def test_a_file_nested_too_deeply_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("[" * 200_000)
    with pytest.raises(HostConfigError, match=f"{path}.*nested too deeply"):
        hc.write_host_config("cursor", path, entry("cursor"))
    assert backups(tmp_path) == []


@pytest.mark.parametrize("make", ["fifo", "directory"])
def test_something_other_than_a_file_at_the_hosts_path_is_refused(
    tmp_path: Path, make: str
) -> None:
    path = tmp_path / "mcp.json"
    if make == "fifo":
        os.mkfifo(path)  # nothing writes to it: reading would wait for ever
    else:
        path.mkdir()
    with pytest.raises(HostConfigError, match=f"{path} is not a regular file"):
        hc.write_host_config("cursor", path, entry("cursor"))
    assert backups(tmp_path) == []


# -- bytes kept --


def test_codex_crlf_file_keeps_its_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    before = b'# mine\r\nmodel = "o3"\r\n\r\n[mcp_servers.other]\r\ncommand = "x"\r\n'
    path.write_bytes(before)
    hc.write_host_config("codex", path, entry("codex"))
    after = path.read_bytes()
    assert after.startswith(before + b"\r\n[mcp_servers.mcpd]\r\n")
    assert b"\n" not in after.replace(b"\r\n", b"")
