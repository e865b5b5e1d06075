"""mcpd's journal entries as a real systemd-journald stores them: `mcpd serve --log journal`
with two stdio servers, one of which goes down and comes back, then the entries are read
back with `journalctl MCPD_SERVER=... MCPD_EVENT=...`. The daemon's sd_notify messages
(READY, STATUS through the outage, STOPPING) are captured on a datagram socket.

journald runs on the host, in a private mount namespace with a tmpfs on /run and on
/var/log/journal: its sockets and files exist only there, and mcpd and journalctl are
started inside that namespace with nsenter. Needs root.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.audit.logfile import FILE_NAME
from tests.conftest import ROOT
from tests.support.daemons.notify import Notifications
from tests.support.system import required
from tests.support.system.procs import scripted
from tests.systemd import harness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BURST_AGENT = str(ROOT / "tests" / "support" / "clients" / "call_burst.py")
JOURNALD_PATHS = ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald")

LAUNCH = """\
set -eu
mount -t tmpfs -o mode=0755 tmpfs /run
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
mkdir -p /run/systemd/journald.conf.d
printf '[Journal]\\nStorage=volatile\\nReadKMsg=no\\nForwardToWall=no\\n' \
    > /run/systemd/journald.conf.d/test.conf
exec "$1"
"""


def _journald() -> str | None:
    return next((p for p in JOURNALD_PATHS if os.path.exists(p)), None)


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (a mount namespace for journald)"
    for tool in ("unshare", "nsenter", "journalctl"):
        if not shutil.which(tool):
            return f"{tool} is missing"
    if _journald() is None and harness.skip_reason() is None:
        harness.ensure_host_tools()  # systemd-container brings systemd (and journald) along
    if _journald() is None:
        return "systemd-journald is not installed"
    return None


class Journald:
    """A private systemd-journald; ``inside(cmd)`` runs in its mount namespace."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def inside(self, *cmd: str) -> list[str]:
        return ["nsenter", f"--mount=/proc/{self.proc.pid}/ns/mnt", "--", *cmd]

    def entries(self, *match: str) -> list[dict[str, Any]]:
        out = subprocess.run(
            self.inside("journalctl", *match, "-o", "json", "--all", "--no-pager"),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return [json.loads(line) for line in out.splitlines() if line]


@pytest.fixture
def journald() -> Iterator[Journald]:
    reason = _skip_reason()
    if reason:
        required.impossible("the real-journald test", required.SYSTEMD, reason)
    binary = _journald()
    assert binary is not None
    proc = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", LAUNCH, "sh", binary],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        sock = Path(f"/proc/{proc.pid}/root/run/systemd/journal/socket")
        deadline = time.monotonic() + 20
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.communicate()[0].decode(errors="replace")
                pytest.fail(f"systemd-journald did not start (rc {proc.returncode}):\n{out}")
            time.sleep(0.05)
        yield Journald(proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _child(parent: int, module: str) -> int:
    """The server process running ``module`` that ``parent`` started: in its sandbox,
    bubblewrap's, a few generations down."""
    parents: dict[int, int] = {}
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(") ", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        pid = int(stat.parent.name)
        parents[pid] = ppid
        if module.encode() in cmdline and not cmdline[0].endswith(b"bwrap"):
            found.append(pid)
    for pid in found:
        up = parents.get(pid)
        for _ in range(4):
            if up == parent:
                return pid
            up = parents.get(up or 0)
    raise AssertionError(f"no {module} process started by {parent}")


def test_outage_and_recovery_read_back_with_journalctl(journald: Journald) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpd-jr-") as tmp:
        config = Path(tmp, "config.toml")
        config.write_text(
            f"""
            [daemon]
            socket = "{tmp}/mcpd.sock"
            backoff_base = 0.5
            [servers.notes]
            command = "{sys.executable}"
            args = ["-m", "mcpd.demo.notes"]
            [servers.tickets]
            command = "{sys.executable}"
            args = ["-m", "mcpd.demo.tickets", "--log-level", "DEBUG"]
            """.replace("\n            ", "\n")
        )
        notify = Notifications(Path(f"{tmp}/notify"))
        env = {**os.environ, "NOTIFY_SOCKET": notify.path, "PYTHONPATH": str(ROOT)}
        daemon = subprocess.Popen(
            journald.inside(
                sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--log", "journal"
            ),
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            notify.next_with("READY=1", timeout=30)
            assert "STATUS=2 servers: 2 ready" in notify.seen[-1], notify.seen

            tickets = _child(daemon.pid, "mcpd.demo.tickets")
            os.kill(tickets, signal.SIGTERM)  # tickets goes down...
            failed = "2 servers: 1 ready, 1 failed (mcpd status and the journal say which)"
            notify.next_with(f"STATUS={failed}", timeout=30)
            notify.next_with("STATUS=2 servers: 2 ready", timeout=30)  # ...and is restarted
            assert _child(daemon.pid, "mcpd.demo.tickets") != tickets

            daemon.send_signal(signal.SIGTERM)
            notify.next_with("STOPPING=1", timeout=30)
            assert daemon.wait(timeout=30) == 0
        finally:
            if daemon.poll() is None:
                daemon.kill()
            stderr = daemon.communicate()[1].decode(errors="replace")
            notify.sock.close()
        assert stderr == "", "with --log journal nothing should go to stderr"

    (outage,) = journald.entries("MCPD_SERVER=tickets", "MCPD_EVENT=outage")
    assert outage["_PID"] == str(daemon.pid)
    assert outage["SYSLOG_IDENTIFIER"] == "mcpd"
    assert outage["PRIORITY"] == "4"
    assert outage["MESSAGE"].startswith("tickets: unavailable: "), outage["MESSAGE"]
    assert outage["MCPD_REASON"].endswith("exited with status 0"), outage
    # The server's last stderr lines, one multi-line field (at debug, the demo says
    # which signal stopped it before it says it stopped).
    tail = outage["MCPD_STDERR"]
    assert isinstance(tail, str) and "\n" in tail, tail
    assert "stopping on SIGTERM" in tail, tail
    assert outage["CODE_FILE"].endswith("runner.py")

    (recovered,) = journald.entries("MCPD_SERVER=tickets", "MCPD_EVENT=recovered")
    assert recovered["PRIORITY"] == "6"
    assert float(recovered["__REALTIME_TIMESTAMP"]) > float(outage["__REALTIME_TIMESTAMP"])
    assert [e["MCPD_SERVER"] for e in journald.entries("MCPD_EVENT=outage")] == ["tickets"]
    ready = journald.entries("MCPD_SERVER=notes", "MCPD_EVENT=ready")
    assert len(ready) == 1 and ready[0]["MESSAGE"].startswith("notes: "), ready


def _calls(sock: str, count: int) -> list[dict[str, bool]]:
    calls = json.dumps([["mcp__gh__read", {}]] * count)
    agent = [sys.executable, BURST_AGENT, sock, "default", "modern", calls]
    done = subprocess.run(agent, capture_output=True, check=True, timeout=60, cwd=ROOT)
    results: list[dict[str, bool]] = json.loads(done.stdout)["results"]
    return results


def _audited(file: Path, count: int) -> None:
    """Wait until the audit writer has written ``count`` calls (and their entries)."""
    deadline = time.monotonic() + 30
    while not file.exists() or file.read_text().count('"mcp__gh__read"') < count:
        assert time.monotonic() < deadline, f"{count} calls not written to {file}"
        time.sleep(0.05)


def _inside(pid: int, *cmd: str) -> list[str]:
    return ["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", *cmd]


def test_journald_stopped_costs_entries_never_the_daemon(journald: Journald) -> None:
    """journald stops, its sockets and the daemon's stream with it: the calls made then
    are answered and on record in the audit file, the daemon serves on, and once
    journald is back an entry says how many entries were lost."""
    with tempfile.TemporaryDirectory(prefix="mcpd-jg-") as tmp:
        command, args = scripted("--names", "read")
        config = Path(tmp, "config.toml")
        config.write_text(
            f'[daemon]\nsocket = "{tmp}/mcpd.sock"\nstate_dir = "{tmp}/state"\naudit = true\n'
            f"[servers.gh]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
        )
        notify = Notifications(Path(f"{tmp}/notify"))
        audit = Path(tmp, "state", FILE_NAME)
        # stderr as systemd gives it: journald's stream, which goes when journald does.
        read, write = os.pipe()
        st = os.fstat(write)
        env = {**os.environ, "NOTIFY_SOCKET": notify.path, "PYTHONPATH": str(ROOT)}
        env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        serve = [sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--log", "auto"]
        daemon = subprocess.Popen(
            journald.inside(*serve), env=env, stdin=subprocess.DEVNULL, stderr=write, cwd=ROOT
        )
        os.close(write)
        restarted: subprocess.Popen[bytes] | None = None
        try:
            notify.next_with("READY=1", timeout=30)
            assert _calls(f"{tmp}/mcpd.sock", 1) == [{"is_error": False, "error": False}]
            _audited(audit, 1)

            journald.proc.terminate()
            journald.proc.wait(timeout=10)
            os.close(read)
            sockets = ["/run/systemd/journal/socket", "/run/systemd/journal/stdout"]
            subprocess.run(_inside(daemon.pid, "rm", "-f", *sockets), check=True, timeout=10)
            for written in (2, 3):
                assert _calls(f"{tmp}/mcpd.sock", 1) == [{"is_error": False, "error": False}]
                _audited(audit, written)
            assert daemon.poll() is None, "the daemon stopped with journald"

            binary = _journald()
            assert binary is not None
            restarted = subprocess.Popen(_inside(daemon.pid, binary), stdout=subprocess.DEVNULL)
            back = Path(f"/proc/{restarted.pid}/root/run/systemd/journal/socket")
            deadline = time.monotonic() + 20
            while not back.exists():
                assert time.monotonic() < deadline, "systemd-journald did not start again"
                time.sleep(0.05)
            assert _calls(f"{tmp}/mcpd.sock", 1) == [{"is_error": False, "error": False}]
            _audited(audit, 4)

            daemon.send_signal(signal.SIGTERM)
            notify.next_with("STOPPING=1", timeout=30)
            assert daemon.wait(timeout=30) == 0
            entries = subprocess.run(
                _inside(restarted.pid, "journalctl", "-o", "json", "--all", "--no-pager"),
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            if restarted is not None:
                restarted.terminate()
                restarted.wait(timeout=10)
            notify.sock.close()

    mcpd = [
        e for e in map(json.loads, entries.splitlines()) if e.get("SYSLOG_IDENTIFIER") == "mcpd"
    ]
    calls = [e for e in mcpd if e.get("MCPD_EVENT") == "call"]
    assert len(calls) == 2, calls  # before journald stopped, and after it was back
    (lost,) = [e for e in mcpd if e.get("MCPD_EVENT") == "dropped"]
    assert lost["MESSAGE"].startswith("2 log entries dropped: neither journald nor stderr"), lost
    assert "2 call records, which the audit file keeps" in lost["MESSAGE"], lost
    assert mcpd.index(lost) < mcpd.index(calls[1])
