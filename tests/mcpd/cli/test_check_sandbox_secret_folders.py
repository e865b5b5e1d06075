"""What ``mcpd check-config`` says of a secret file whose directory cannot be hidden
from a sandboxed server: a file renamed onto its name, or created there, while the
server runs is one it can read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MCPD = [sys.executable, "-m", "mcpd"]


def test_check_config_names_a_secret_file_whose_directory_servers_need(tmp_path: Path) -> None:
    home, own = tmp_path / "home", tmp_path / "secrets"
    home.mkdir()
    own.mkdir()
    beside, apart = tmp_path / "beside-home", own / "apart"
    beside.write_text("one\n")
    apart.write_text("two\n")
    beside.chmod(0o600)
    apart.chmod(0o600)
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        '[servers.files]\ncommand = "/bin/true"\n'
        '[servers.other]\ncommand = "/bin/true"\n'
        '[servers.tickets]\nurl = "http://127.0.0.1:9/mcp"\n'
        f'headers = {{ A = "${{file:{beside}}}", B = "${{file:{apart}}}" }}\n'
    )
    checked = subprocess.run(
        [*MCPD, "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
    )
    assert checked.returncode == 0, checked.stderr
    said = [line for line in checked.stderr.splitlines() if "in a directory of its own" in line]
    # Said once for the file, whichever servers it concerns; nothing of the other file.
    assert len(said) == 1, checked.stderr
    assert said[0].startswith(f"warning: {beside} is hidden from a sandboxed server as it is")
    assert f"its directory {tmp_path} cannot be hidden: it holds the user's home" in said[0]


def test_a_host_file_kept_in_the_home_is_not_told_to_move_but_how_to_import_it(
    tmp_path: Path,
) -> None:
    """``~/.claude.json`` stays where Claude Code keeps it: what can be kept apart is a
    config mcpd writes from it."""
    home = tmp_path / "home"
    home.mkdir()
    host_file = home / ".claude.json"
    host_file.write_text('{"mcpServers": {"files": {"command": "/bin/true"}}}')
    host_file.chmod(0o600)
    checked = subprocess.run(
        [*MCPD, "check-config", "--config", str(host_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **{k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"},
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "MCPD_SOCKET": str(tmp_path / "s.sock"),
        },
    )
    assert checked.returncode == 0, checked.stderr
    said = [line for line in checked.stderr.splitlines() if str(host_file) in line]
    assert len(said) == 1, checked.stderr
    assert said[0].startswith(f"warning: {host_file} is hidden from a sandboxed server")
    assert "keep such a file in a directory of its own" not in said[0]
    default = "/etc/mcpd/config.toml" if os.geteuid() == 0 else f"{tmp_path}/xdg/mcpd/config.toml"
    assert said[0].endswith(
        "this file is where its host keeps it, so give mcpd a config of its own, in a "
        f"directory of its own: mcpd import {host_file} -o {default}"
    )
