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
