"""What ``mcpd check-config`` says of each stdio server's sandbox
(``mcpd.cli.check_sandbox``), built here from a parsed config: the level, grants,
network and loopback ports, limits, the names (never the values) of the environment
beyond the default set, and one warning per variable a server seems to rely on and
no longer inherits, for enabled servers only."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpd.cli.check_sandbox import inherited_warnings, sandbox_lines
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from tests.support.daemons.as_operator import MCPD, client, start, stop
from tests.support.system import required
from transports.stdio.sandbox import host


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}


def config_of(tmp_path: Path, env: dict[str, str], **servers: dict[str, Any]) -> Config:
    data = {"daemon": {"state_dir": str(tmp_path / "state")}, "servers": servers}
    return parse_config(data, env=env)


def lines_of(config: Config, alias: str, env: dict[str, str]) -> list[str]:
    return sandbox_lines(alias, config.servers[alias], config, env)


def test_the_first_line_sums_up_the_sandbox_and_the_second_the_environment(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = config_of(tmp_path, env, s={"command": "/bin/true"})
    first, second, *rest = lines_of(config, "s", env)
    assert first.startswith("sandbox default; network; limits: ")
    assert second == "env: the default set"
    assert all(r.startswith("unprotected: ") for r in rest)


def test_grants_no_network_loopback_ports_and_limits_are_each_said(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = config_of(
        tmp_path,
        env,
        s={
            "command": "/bin/true",
            "sandbox": "strict",
            "read": [str(tmp_path / "a"), str(tmp_path / "b")],
            "write": [str(tmp_path / "out")],
            "network": False,
            "host_loopback": [8080, 5432],
            "limits": {"cpu": 60, "processes": 0},
        },
    )
    first = lines_of(config, "s", env)[0]
    assert first.startswith(
        f"sandbox strict; read {tmp_path / 'a'}, {tmp_path / 'b'}; write {tmp_path / 'out'}; "
        "no network but host loopback ports 8080, 5432; limits: "
    )
    assert "cpu 60 s" in first
    assert "processes" not in first  # 0 is no limit: not listed


def test_the_environment_is_named_never_its_values(tmp_path: Path, env: dict[str, str]) -> None:
    config = config_of(
        tmp_path,
        env,
        s={"command": "/bin/true", "env": {"ZED_TOKEN": "s3cr3t", "API_KEY": "k3y"}},
        everything={"command": "/bin/true", "inherit_env": True},
    )
    lines = lines_of(config, "s", env)
    assert lines[1] == "env: the default set + API_KEY, ZED_TOKEN"
    assert not any("s3cr3t" in line or "k3y" in line for line in lines)
    assert lines_of(config, "everything", env)[1].startswith("env: all of mcpd's environment")


def test_a_disabled_server_is_not_said_to_be_unprotected(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = config_of(tmp_path, env, off={"command": "/bin/true", "enabled": False})
    assert len(lines_of(config, "off", env)) == 2


def test_a_variable_a_server_seems_to_rely_on_is_warned_of_by_name_only(
    tmp_path: Path, env: dict[str, str]
) -> None:
    here = {**env, "GITHUB_TOKEN": "ghp-value", "UNRELATED_TOKEN": "other"}
    config = config_of(
        tmp_path,
        here,
        github={"command": "/usr/bin/github-mcp"},
        given={"command": "/usr/bin/github-mcp", "inherit_env": ["GITHUB_*"]},
        off={"command": "/usr/bin/github-mcp", "enabled": False},
    )
    assert inherited_warnings(config, here) == [
        "servers.github: GITHUB_TOKEN is set here but the server no longer inherits it; "
        'if it needs it, add "GITHUB_TOKEN" to servers.github.inherit_env'
    ]


def test_a_variable_named_in_the_arguments_is_warned_of(
    tmp_path: Path, env: dict[str, str]
) -> None:
    here = {**env, "DB_URL": "postgres://x"}
    config = config_of(
        tmp_path, here, db={"command": "/bin/sh", "args": ["-c", "exec db-mcp --url $DB_URL"]}
    )
    [warning] = inherited_warnings(config, here)
    assert warning.startswith("servers.db: DB_URL is set here")
    assert "postgres" not in warning


def test_an_http_server_has_no_inherited_environment_to_warn_of(
    tmp_path: Path, env: dict[str, str]
) -> None:
    here = {**env, "REMOTE_TOKEN": "t"}
    config = config_of(tmp_path, here, remote={"url": "https://remote.example/mcp"})
    assert inherited_warnings(config, here) == []


def test_a_machine_that_cannot_refuse_user_namespaces_or_keyrings_or_bound_dev_shm_is_said_so(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = host.probe()
    if machine.bwrap is None or machine.namespaces is not None:
        why = "no sandbox here at all, which its own line says"
        required.impossible("sandbox tests", required.SANDBOX, why)
    old = "bwrap: Unknown option --disable-userns"
    setuid = "bwrap: Creating new namespace failed: Operation not permitted"
    unsized = "bwrap: Unknown option --size"
    worse = msgspec.structs.replace(
        machine, userns_denial=old, keyring_denial=setuid, tmpfs_unsized=unsized
    )
    monkeypatch.setattr(host, "_machine", [worse])
    config = config_of(
        tmp_path, env, s={"command": "/bin/true"}, o={"command": "/bin/true", "sandbox": "off"}
    )
    said = [line for line in lines_of(config, "s", env) if line.startswith("unprotected: ")]
    assert len(said) == 1, said
    assert "it can make user namespaces of its own" in said[0] and old in said[0]
    assert "it can read the keys of mcpd's session keyring" in said[0] and setuid in said[0]
    # The default memory limit is not a bound on what it keeps in /dev/shm there.
    assert (
        "what it writes to /dev/shm is memory that daemon.limits.memory does not count"
    ) in said[0] and unsized in said[0]
    # A server started as it is was never to be kept from either.
    assert not [line for line in lines_of(config, "o", env) if "unprotected" in line]


def test_check_config_says_the_open_files_a_server_gets_as_status_does(tmp_path: Path) -> None:
    """Under a hard limit on open files below the configured one, each says the hard
    limit, which is what a started server gets."""

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 2048))

    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        '[servers.s]\ncommand = "/bin/true"\nstart = "lazy"\nlimits = { open_files = 100000 }\n'
    )
    checked = subprocess.run(
        [*MCPD, "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lowered,
    )
    assert checked.returncode == 0, checked.stderr
    assert "open files 2048 (the hard limit here; 100000 configured)" in checked.stdout
    sock = tmp_path / "mcpd.sock"
    proc = start(["--config", str(config)], sock, preexec=lowered)
    try:
        status = client(sock, "status", "--json")
        assert status.returncode == 0, status.stderr
        [server] = json.loads(status.stdout)["servers"]
        assert server["sandbox"]["limits"]["open_files"] == 2048
    finally:
        stop(proc)
