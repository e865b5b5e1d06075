"""The shipped unit files: `systemd-analyze verify` accepts them, and they say what mcpd
relies on. Verify needs ExecStart's and ExecReload's binary to exist, so a drop-in points
them at a stub."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpd.local.service import systemd as sd
from tests.conftest import ROOT
from tests.support.system import required
from tests.systemd import harness

UNITS = ROOT / "systemd"


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None and harness.skip_reason() is None:
        harness.ensure_host_tools()  # systemd-container brings systemd along
        path = shutil.which("systemd-analyze")
    if path is None:
        required.impossible("systemd-analyze", required.SYSTEMD, "it is not installed")
    return path


def _verify(tmp_path: Path, units: list[Path], *, user: bool) -> None:
    for unit in units:
        shutil.copy(unit, tmp_path / unit.name)
    stub = tmp_path / "mcpd-stub"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    dropin = tmp_path / "mcpd.service.d"
    dropin.mkdir()
    (dropin / "stub.conf").write_text(
        f"[Service]\nExecStart=\nExecStart={stub} serve\nExecReload=\nExecReload={stub} reload\n"
    )
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_LEVEL": "notice"}
    cmd = ["systemd-analyze", *(["--user"] if user else []), "verify", "--man=no"]
    proc = subprocess.run(
        [*cmd, *(str(tmp_path / u.name) for u in units)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    # verify exits 0 on unknown keys or bad values but complains on stderr.
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_system_units_verify(tmp_path: Path, systemd_analyze: str) -> None:
    _verify(tmp_path, [UNITS / "mcpd.service", UNITS / "mcpd.socket"], user=False)


def test_user_units_verify(tmp_path: Path, systemd_analyze: str) -> None:
    _verify(tmp_path, [UNITS / "user/mcpd.service", UNITS / "user/mcpd.socket"], user=True)


def _settings(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def test_system_service_settings() -> None:
    s = _settings(UNITS / "mcpd.service")
    assert s["Type"] == ["notify"]
    assert s["ExecStart"] == ["/usr/local/bin/mcpd serve --config /etc/mcpd/config.toml"]
    # As root: the service's user may not open the socket, which is root's and the agents'.
    assert s["ExecReload"] == ["+/usr/local/bin/mcpd reload --socket %t/mcpd/mcpd.sock"]
    assert s["WatchdogSec"] == ["30s"]
    assert s["Restart"] == ["on-failure"]
    assert s["KillMode"] == ["mixed"]
    assert s["RestartPreventExitStatus"] == ["78"]
    assert s["StateDirectory"] == ["mcpd"]
    # systemd would give a RuntimeDirectory= to User=: /run/mcpd is mcpd.socket's, root's.
    assert "RuntimeDirectory" not in s
    assert s["Requires"] == ["mcpd.socket"] and "mcpd.socket" in s["After"]
    assert s["User"] == ["mcpd"] and s["Group"] == ["mcpd"]
    for key in ("NoNewPrivileges", "PrivateTmp", "RestrictSUIDSGID", "LockPersonality"):
        assert s[key] == ["yes"], key
    assert s["ProtectSystem"] == ["strict"] and s["ProtectHome"] == ["yes"]
    # Servers keep their package caches in their own homes: none set for all of them.
    assert not [e for e in s.get("Environment", []) if "cache" in e.lower()]
    assert "CacheDirectory" not in s


CONFINEMENT = {
    # @mount for the servers' sandboxes (bubblewrap mounts inside namespaces of its own),
    # the Landlock calls for their domain (``transports.stdio.sandbox.landlock``).
    "SystemCallFilter": [
        "@system-service",
        "@mount",
        "landlock_create_ruleset landlock_restrict_self",
    ],
    "SystemCallErrorNumber": ["EPERM"],
    "LimitCORE": ["0"],
    "TasksMax": ["4096"],
    "MemoryMax": ["8G"],
    "OOMPolicy": ["continue"],
}


def test_both_services_filter_system_calls_and_bound_the_unit() -> None:
    """The real-systemd tests show these in force; here, that the user unit has them
    too, except RemoveIPC=, which a user manager does not apply."""
    system = _settings(UNITS / "mcpd.service")
    user = _settings(UNITS / "user/mcpd.service")
    assert {k: system.get(k) for k in CONFINEMENT} == CONFINEMENT
    assert {k: user.get(k) for k in CONFINEMENT} == CONFINEMENT
    assert system["RemoveIPC"] == ["yes"] and "RemoveIPC" not in user


def test_sockets_match_what_mcpd_adopts() -> None:
    system = _settings(UNITS / "mcpd.socket")
    assert system["ListenStream"] == ["/run/mcpd/mcpd.sock"]
    # Agents' group, not the service's own (which reads the config).
    assert system["SocketMode"] == ["0660"] and system["SocketGroup"] == ["mcpd-agents"]
    assert system["SocketUser"] == ["root"] and system["DirectoryMode"] == ["0755"]
    user = _settings(UNITS / "user/mcpd.socket")
    assert user["ListenStream"] == ["%t/mcpd/mcpd.sock"]
    for s in (system, user):
        assert s["FileDescriptorName"] == [sd.API_FDNAME]
        assert s["Accept"] == ["no"]
    sysusers = (UNITS / "mcpd.sysusers").read_text()
    assert "\nu mcpd - " in sysusers and "\ng mcpd-agents -\n" in sysusers


def _seconds(value: str) -> float:
    return float(value.removesuffix("s")) if not value.endswith("min") else 60 * float(value[:-3])


def test_start_limit_stops_a_crash_loop_but_not_restarts_by_hand() -> None:
    """A daemon that dies as it starts is restarted every RestartSec: that must reach the
    limit within the interval. Ten restarts by hand in two minutes must not."""
    s = _settings(UNITS / "mcpd.service")
    burst = int(s["StartLimitBurst"][0])
    interval = _seconds(s["StartLimitIntervalSec"][0])
    restart_sec = _seconds(s["RestartSec"][0])
    assert burst * restart_sec < interval, (burst, restart_sec, interval)
    # At most `burst` starts fit in any window of `interval`: ten in 120 s, spread
    # evenly, put at most 10 * interval / 120 + 1 in one.
    assert burst > 10 * interval / 120 + 1, (burst, interval)
