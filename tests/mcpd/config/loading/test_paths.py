"""Where the daemon's files are: the socket a client reads from a config file (only
that one key, and never an error), and systemd's directories before the XDG ones.
The order of the socket's sources is in test_paths_discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.config.loading.paths import configured_socket, found_state_directory, runtime_directory


@pytest.mark.parametrize(
    ("text", "socket"),
    [
        ('[daemon]\nsocket = "/run/x.sock"\n', "/run/x.sock"),
        ('[daemon]\nsocket = "${HOME}/x.sock"\n', "/home/me/x.sock"),
        ('[daemon]\nsocket = "/run/$$x.sock"\n', "/run/$x.sock"),
        ('[daemon]\nsocket = ""\n', None),
        ("[daemon]\nsocket = 7\n", None),
        ('[daemon]\nsocket = ["/a"]\n', None),
        ('daemon = "x"\n', None),
        ("[servers.a]\ncommand = 'x'\n", None),
        ('[daemon]\nsocket = "${NOT_SET_ANYWHERE}/x.sock"\n', None),
        # Read as the daemon reads it: a reference left open is an error, the daemon's
        # to report; what is no reference is literal.
        ('[daemon]\nsocket = "${HOME"\n', None),
        ('[daemon]\nsocket = "$HOME/x.sock"\n', "$HOME/x.sock"),
        ("[daemon\n", None),
        ("", None),
        # An editor's byte order mark, which the daemon reads past.
        ('\ufeff[daemon]\nsocket = "/run/x.sock"\n', "/run/x.sock"),
    ],
)
def test_the_socket_a_config_names_or_none(tmp_path: Path, text: str, socket: str | None) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert configured_socket(str(path), {"HOME": "/home/me"}) == socket


def test_a_file_that_is_no_toml_config_names_no_socket(tmp_path: Path) -> None:
    json_file = tmp_path / "config.json"
    json_file.write_text('{"daemon": {"socket": "/x.sock"}}')
    assert configured_socket(str(json_file), {}) is None
    braces = tmp_path / "config"
    braces.write_text('  {"mcpServers": {}}')
    assert configured_socket(str(braces), {}) is None
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'[daemon]\nsocket = "\xff\xfe"\n')
    assert configured_socket(str(binary), {}) is None
    assert configured_socket(str(tmp_path / "missing.toml"), {}) is None
    assert configured_socket(str(tmp_path), {}) is None  # a directory


def test_systemds_directories_come_first_and_the_first_of_several() -> None:
    assert runtime_directory({"RUNTIME_DIRECTORY": "/run/mcpd:/run/other"}) == "/run/mcpd"
    assert runtime_directory({"RUNTIME_DIRECTORY": ""}) is None
    assert runtime_directory({}) is None


def test_the_state_directory_is_found_through_the_links_on_its_way(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    env = {"XDG_STATE_HOME": str(tmp_path / "link")}
    assert found_state_directory(None, env) == str(tmp_path.resolve() / "real" / "mcpd")
    configured = str(tmp_path / "link" / "kept")
    assert found_state_directory(configured, env) == str(tmp_path.resolve() / "real" / "kept")
