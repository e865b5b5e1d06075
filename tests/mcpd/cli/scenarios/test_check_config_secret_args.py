"""``mcpd check-config`` on a secret mcpd holds that a server's arguments put on its
command line, where every local user reads it: a ``${file:...}`` key with no option
name or token format to tell it by, or a variable named like a secret. The warning
names the server and the argument, never the value, and says to pass it by env."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MCPD = [sys.executable, "-m", "mcpd"]
# Random letters and digits: no option names it, no token format matches it.
KEY = "Zq8v3kP1xR7mW2nB5cY9dF4gH6jK0lQa"
OTHER = "Lm4nP8qR2sT6vW0xY3zA7bC1dE5fG9hJ"


def check_config(tmp_path: Path, servers: str) -> subprocess.CompletedProcess[str]:
    secret = tmp_path / "secret"
    secret.write_text(KEY + "\n")
    secret.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(servers.replace("SECRET_FILE", str(secret)))
    return subprocess.run(
        [*MCPD, "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "NOTES_API_TOKEN": OTHER, "PLAIN_WORD": OTHER[::-1]},
    )


def warning(alias: str, index: int, what: str) -> str:
    return (
        f"warning: servers.{alias}.args[{index}]: {what} is on the server's command line, "
        "which every local user can read (ps, /proc/PID/cmdline); if the program can take "
        f"it from an environment variable, set that in [servers.{alias}.env] instead (the "
        "same reference works there)"
    )


def test_a_held_secret_in_a_servers_args_is_warned_of_by_position(tmp_path: Path) -> None:
    out = check_config(
        tmp_path,
        '[servers.f]\ncommand = "python3"\n'
        'args = ["-m", "mcpd.demo.notes", "${file:SECRET_FILE}"]\n'
        '[servers.v]\ncommand = "python3"\nargs = ["-m", "mcpd.demo.notes", "${NOTES_API_TOKEN}"]\n'
        # Not a secret by its name: mcpd holds no secret there, nothing to say.
        '[servers.plain]\ncommand = "python3"\nargs = ["-m", "mcpd.demo.notes", "${PLAIN_WORD}"]\n'
        # The same key by env, as the warning says to pass it: nothing to say either.
        '[servers.env]\ncommand = "python3"\nargs = ["-m", "mcpd.demo.notes"]\n'
        'env = { NOTES_KEY = "${file:SECRET_FILE}" }\n',
    )
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "command line" in line]
    reference = "a secret that a ${...} reference puts there"
    assert said == [warning("f", 2, reference), warning("v", 2, reference)]
    assert KEY not in out.stdout + out.stderr
    assert OTHER not in out.stdout + out.stderr


def test_a_secret_held_elsewhere_and_written_in_an_argument_names_its_key(
    tmp_path: Path,
) -> None:
    out = check_config(
        tmp_path,
        '[servers.h]\nurl = "https://mcp.example.com/mcp"\n'
        'headers = { Authorization = "Bearer ${file:SECRET_FILE}" }\n'
        '[servers.s]\ncommand = "python3"\n'
        f'args = ["-m", "mcpd.demo.notes", "{KEY}"]\n',
    )
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "command line" in line]
    assert said == [warning("s", 2, "servers.h.headers.Authorization's secret")]
    assert KEY not in out.stdout + out.stderr


def test_a_secret_the_argument_rules_name_is_said_once(tmp_path: Path) -> None:
    out = check_config(
        tmp_path,
        '[servers.t]\ncommand = "python3"\n'
        'args = ["-m", "mcpd.demo.notes", "--api-key", "${file:SECRET_FILE}"]\n',
    )
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "command line" in line]
    assert len(said) == 1, said
    assert said[0].startswith("warning: servers.t.args[3]: the value of --api-key")
    assert KEY not in out.stdout + out.stderr
