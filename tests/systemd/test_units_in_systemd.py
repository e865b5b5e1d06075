"""The shipped system units under a real systemd, with a stand-in daemon built on
mcpd.local.service.systemd and mcpd.local.service.journal in place of `mcpd serve`:
socket activation of /run/mcpd/mcpd.sock, READY/STATUS, reload with the same PID,
journald fields queried the way users will, the watchdog restarting a wedged daemon,
and stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.systemd import harness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STANDIN_DROPIN = """\
[Service]
ExecStart=
ExecStart=/opt/mcpd-venv/bin/python /opt/standin/mcpd_standin.py
ExecReload=
ExecReload=/bin/kill -HUP $MAINPID
WatchdogSec=3s
RestartSec=1s
Environment=MCPD_TEST_FAULTS=wedge_on_sigusr2
"""

CHECK = r"""#!/opt/mcpd-venv/bin/python
import json, os, socket, subprocess, time

def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()

def show(prop):
    return sh("systemctl", "show", "-p", prop, "--value", "mcpd")

def wait_for(what, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)

def ask():
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect("/run/mcpd/mcpd.sock")
        return s.makefile().readline().strip()

def entries(*match):
    out = sh("journalctl", "-u", "mcpd", *match, "-o", "json", "--no-pager")
    return [json.loads(line) for line in out.splitlines()]

def text(value):  # journalctl -o json gives non-printable values as byte arrays
    return bytes(value).decode() if isinstance(value, list) else value

sh("systemd-sysusers")
sh("systemctl", "start", "mcpd.socket")
st = os.stat("/run/mcpd/mcpd.sock")
assert oct(st.st_mode & 0o777) == "0o660", oct(st.st_mode)
assert st.st_gid == int(sh("getent", "group", "mcpd-agents").split(":")[2])

reply = ask()                      # the first connection starts mcpd.service
pid = show("MainPID")
assert reply == f"pong {pid}", (reply, pid)
assert sh("systemctl", "is-active", "mcpd") == "active"
assert show("StatusText") == "serving"
assert sh("ps", "-o", "user=", "-p", pid) == "mcpd"
print("socket-activated, ready, pid", pid)

outage = entries("MCPD_EVENT=outage")
assert len(outage) == 1, outage
e = outage[0]
assert e["MESSAGE"] == "tickets: server tickets is down"
assert e["MCPD_SERVER"] == "tickets" and e["MCPD_REASON"] == "exited with status 1"
assert text(e["MCPD_STDERR"]) == "Traceback (most recent call last):\nRuntimeError: no database"
assert e["PRIORITY"] == "4" and e["SYSLOG_IDENTIFIER"] == "mcpd"
assert e["CODE_FUNC"] == "main"
tickets = entries("MCPD_SERVER=tickets")
assert [x["MESSAGE"] for x in tickets][1:] == [f"tickets: tickets stderr {i}" for i in range(3)]
crash = entries("MCPD_EVENT=crash_loop", "--all")    # --all: json shows big fields
assert len(crash) == 1
big = text(crash[0]["MCPD_STDERR"]).split("\n")
assert len(big) == 3000 and big[-1] == "line 02999 " + "x" * 90
log = sh("journalctl", "-u", "mcpd", "--no-pager", "-o", "cat")
assert "log handler: JournalHandler" in log, log
assert "child env leaks: none" in log, log
print("journal fields ok, including a 300 kB entry sent through a memfd")

sh("systemctl", "reload", "mcpd")
wait_for("reload", lambda: show("StatusText") == "serving (reloaded)")
assert show("MainPID") == pid
assert len(entries("MCPD_EVENT=reload")) == 1
print("reloaded, same pid")

os.kill(int(pid), 10 + 2)          # SIGUSR2: the test fault wedges the event loop
wait_for("watchdog restart", lambda: show("NRestarts") == "1" and show("MainPID") not in ("0", pid))
wait_for("ready again", lambda: show("StatusText") == "serving")
new_pid = show("MainPID")
assert ask() == f"pong {new_pid}"
system_log = sh("journalctl", "-u", "mcpd", "--no-pager")
assert "Watchdog timeout" in system_log, system_log
print("watchdog restarted the wedged daemon:", pid, "->", new_pid)

for i in range(7):                 # someone restarting it while editing the config
    sh("systemctl", "restart", "mcpd")
assert sh("systemctl", "is-active", "mcpd", "mcpd.socket") == "active\nactive"
print("restarted 7 times by hand, still active")

sh("systemctl", "stop", "mcpd")
state = subprocess.run(["systemctl", "is-active", "mcpd"], capture_output=True, text=True)
assert state.stdout.strip() == "inactive", state
assert os.path.exists("/run/mcpd/mcpd.sock")   # the socket unit still owns it
print("CHECK-OK")
"""


def test_shipped_units_under_real_systemd(systemd_rootfs: harness.Rootfs) -> None:
    m = harness.Machine(systemd_rootfs)
    m.install_mcpd()
    m.add_file("/opt/standin/mcpd_standin.py", Path(__file__).parent / "standin/mcpd_standin.py")
    m.add_unit(ROOT / "systemd/mcpd.service")
    m.add_unit(ROOT / "systemd/mcpd.socket")
    m.add_unit("mcpd.service.d/standin.conf", text=STANDIN_DROPIN)
    m.add_file("/usr/lib/sysusers.d/mcpd.conf", ROOT / "systemd/mcpd.sysusers")
    result = m.run(CHECK, timeout=180)
    assert result.rc == 0, result.report()
    assert "CHECK-OK" in result.check_log
