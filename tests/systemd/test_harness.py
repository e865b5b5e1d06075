"""The harness boots a real systemd: a stdlib stand-in notify daemon is started
(returning after READY=1), reloaded (same PID) and stopped; failures, timeouts and
cleanup behave."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from tests.systemd import harness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HERE = Path(__file__).parent

NOTIFYD_UNIT = """\
[Unit]
Description=stand-in notify daemon

[Service]
Type=notify
ExecStart=/usr/bin/python3 /opt/standin/notifyd.py
ExecReload=/bin/kill -HUP $MAINPID
RuntimeDirectory=notifyd
WatchdogSec=10s
TimeoutStartSec=20s
"""

NOTIFYD_CHECK = r"""
set -eu
show() { systemctl show -p "$1" --value notifyd; }

systemctl start notifyd                # returns once READY=1 arrived
test "$(systemctl is-active notifyd)" = active
pid=$(show MainPID)
test "$(cat /run/notifyd/pid)" = "$pid"
test "$(show StatusText)" = serving
echo "started pid=$pid"

systemctl reload notifyd
for _ in $(seq 100); do [ "$(show StatusText)" = "reloaded 1" ] && break; sleep 0.1; done
test "$(show StatusText)" = "reloaded 1"
test "$(show MainPID)" = "$pid"
echo "reloaded, same pid"

systemctl stop notifyd
test "$(systemctl is-active notifyd || true)" = inactive
test ! -e /run/notifyd
journalctl -u notifyd --no-pager | grep -q "notifyd got SIGHUP, reload #1"
journalctl -u notifyd --no-pager | grep -q "notifyd stopping"
echo "stopped"
echo CHECK-OK
"""


def _assert_clean(result: harness.RunResult) -> None:
    """The run left no cgroup, mount or work directory (other runs may be going on)."""
    assert result.run_id
    for root in harness._cgroup_roots():
        assert not (root / f"mcpd-harness-{result.run_id}").exists()
    assert f"mcpd-harness.{result.run_id}." not in Path("/proc/mounts").read_text()
    assert not list(Path(tempfile.gettempdir()).glob(f"mcpd-harness.{result.run_id}.*"))


def test_notify_daemon_start_reload_stop(systemd_rootfs: harness.Rootfs) -> None:
    m = harness.Machine(systemd_rootfs)
    m.add_file("/opt/standin/notifyd.py", HERE / "standin" / "notifyd.py")
    m.add_unit("notifyd.service", text=NOTIFYD_UNIT)
    result = m.run(NOTIFYD_CHECK, timeout=120)
    assert result.rc == 0, result.report()
    assert "CHECK-OK" in result.check_log
    assert "state: running" in result.boot
    assert "notifyd.service: Reloading" in result.journal or "Reloading" in result.journal
    assert not result.warnings
    _assert_clean(result)


def test_check_status_and_files_and_enabled_units(
    systemd_rootfs: harness.Rootfs, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "data.txt").write_text("payload\n")
    m = harness.Machine(systemd_rootfs)
    m.add_tree(tree, "/opt/tree")
    m.add_file("/opt/standin/notifyd.py", HERE / "standin" / "notifyd.py")
    m.add_unit(
        "notifyd.service",
        text=NOTIFYD_UNIT + "\n[Install]\nWantedBy=multi-user.target\n",
        enable=True,
    )
    m.env["GREETING"] = "it's here"
    check = """
        cat /opt/tree/sub/data.txt
        echo "$GREETING"
        systemctl is-active notifyd
        exit 3
    """
    result = m.run(check, timeout=60)
    assert result.rc == 3, result.report()
    assert result.check_log.splitlines() == ["payload", "it's here", "active"]
    _assert_clean(result)


def test_hard_timeout_stops_the_container_and_cleans_up(systemd_rootfs: harness.Rootfs) -> None:
    m = harness.Machine(systemd_rootfs)
    started = time.monotonic()
    result = m.run("echo waiting; sleep 600", timeout=8, check_timeout=300)
    assert result.timed_out and result.rc == 124, result.report()
    assert "waiting" in result.check_log
    assert "Startup finished" in result.journal  # read from the overlay's journal files
    assert time.monotonic() - started < 60
    _assert_clean(result)
