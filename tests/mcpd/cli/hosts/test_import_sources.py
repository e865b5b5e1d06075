"""Where ``mcpd import HOST`` reads a host's servers: the very file ``mcpd connect``
would write for the hosts it connects, Windsurf's and Zed's own files for the two it
only reads, and a path given as it is, even one that is a host's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.cli.hosts.hostconfig import config_path
from mcpd.cli.hosts.import_sources import HOST_NAMES, import_source

ENV = {"HOME": "/home/u"}


@pytest.mark.parametrize(
    "host", ["claude-code", "claude-desktop", "cursor", "vscode", "gemini-cli"]
)
@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_a_connected_host_is_read_where_connect_writes(host: str, system: str) -> None:
    env = {**ENV, "XDG_CONFIG_HOME": "/home/u/xdg"}
    assert import_source(host, env=env, system=system) == str(
        config_path(host, env=env, system=system)
    )


def test_windsurf_is_read_from_its_own_file() -> None:
    got = import_source("windsurf", env=ENV, system="linux")
    assert got == "/home/u/.codeium/windsurf/mcp_config.json"


@pytest.mark.parametrize(
    ("env", "system", "path"),
    [
        (ENV, "linux", "/home/u/.config/zed/settings.json"),
        ({**ENV, "XDG_CONFIG_HOME": "/x"}, "linux", "/x/zed/settings.json"),
        ({**ENV, "XDG_CONFIG_HOME": "/x"}, "darwin", "/home/u/.config/zed/settings.json"),
    ],
)
def test_zed_is_read_from_its_settings(env: dict[str, str], system: str, path: str) -> None:
    assert import_source("zed", env=env, system=system) == path


def test_a_path_or_an_unknown_name_is_taken_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert import_source("./servers.json", env=ENV) == "./servers.json"
    assert import_source("not-a-host", env=ENV) == "not-a-host"
    # A file in the working directory named like a host is that file.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cursor").write_text("{}")
    assert import_source("cursor", env=ENV) == "cursor"


def test_every_host_has_a_file() -> None:
    for host in HOST_NAMES:
        assert import_source(host, env=ENV, system="linux").startswith("/home/u/")
