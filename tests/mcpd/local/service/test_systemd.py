"""sd_notify, the watchdog task, socket activation and the child environment."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.local.service import systemd
from tests.conftest import ROOT


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-sd-") as d:
        yield Path(d)


def _dgram_receiver(address: str | bytes) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(5)
    return sock


def _recv(sock: socket.socket) -> list[str]:
    return sock.recv(65536).decode().splitlines()


def test_notify_to_a_path_socket(short_dir: Path) -> None:
    path = str(short_dir / "notify")
    with _dgram_receiver(path) as rx:
        n = systemd.Notifier.from_environ({"NOTIFY_SOCKET": path})
        assert n.enabled
        assert n.ready()
        assert _recv(rx) == ["READY=1"]
        assert n.ready("serving 3 servers")
        assert _recv(rx) == ["READY=1", "STATUS=serving 3 servers"]
        assert n.status("two\nlines")
        assert _recv(rx) == ["STATUS=two lines"]
        assert n.stopping()
        assert _recv(rx) == ["STOPPING=1"]
        assert n.watchdog()
        assert _recv(rx) == ["WATCHDOG=1"]
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        assert n.reloading()
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        first, second = _recv(rx)
        assert first == "RELOADING=1"
        key, value = second.split("=")
        assert key == "MONOTONIC_USEC"
        assert before <= int(value) <= after
        n.close()


def test_notify_to_an_abstract_socket() -> None:
    name = f"mcpd-test-{uuid.uuid4().hex}"
    with _dgram_receiver(b"\0" + name.encode()) as rx:
        n = systemd.Notifier(f"@{name}")
        assert n.ready()
        assert _recv(rx) == ["READY=1"]
        n.close()


def test_everything_is_a_noop_without_systemd() -> None:
    n = systemd.Notifier.from_environ({})
    assert not n.enabled
    assert n.watchdog_usec is None
    assert not n.ready()
    assert not n.status("x")
    assert not n.reloading()
    assert not n.stopping()
    assert not n.watchdog()
    assert n.failures == 0


def test_send_failures_never_raise_and_log_once(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    n = systemd.Notifier(str(short_dir / "nobody-listens"))
    with caplog.at_level(logging.WARNING, logger="mcpd.systemd"):
        assert not n.ready()
        assert not n.watchdog()
        assert not n.status("x")
    assert n.failures == 3
    assert len([r for r in caplog.records if "sd_notify" in r.getMessage()]) == 1


def test_watchdog_usec_honours_watchdog_pid() -> None:
    me = str(os.getpid())
    assert systemd.watchdog_usec({"WATCHDOG_USEC": "30000000"}) == 30_000_000
    assert systemd.watchdog_usec({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": me}) == 30_000_000
    assert systemd.watchdog_usec({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert systemd.watchdog_usec({"WATCHDOG_USEC": "junk"}) is None
    assert systemd.watchdog_usec({"WATCHDOG_USEC": "0"}) is None
    assert systemd.watchdog_usec({}) is None


async def test_watchdog_task_returns_when_there_is_no_watchdog() -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(systemd.run_watchdog, systemd.Notifier(None))
            await nursery.start(
                systemd.run_watchdog, systemd.Notifier("/nonexistent", watchdog_usec=None)
            )


async def test_watchdog_pings_stop_while_the_loop_is_wedged(short_dir: Path) -> None:
    """Pings come from the event loop: a loop blocked by the SIGUSR2 test fault sends none.

    Datagrams keep their order, so the test reads the sequence instead of timing it:
    pings, "wedged", no pings, "running again", pings.
    """
    path = str(short_dir / "notify")
    rx = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await rx.bind(path)
    env = {
        "NOTIFY_SOCKET": path,
        "WATCHDOG_USEC": "40000",  # ping every 20 ms
        "WATCHDOG_PID": str(os.getpid()),
        "MCPD_TEST_FAULTS": "wedge_on_sigusr2",
        "MCPD_TEST_WEDGE_SECONDS": "0.5",  # ~25 missed pings
    }
    sd = systemd.SystemdEnv.take(env)
    assert env == {}  # everything consumed
    assert sd.faults == {"wedge_on_sigusr2"}

    async def next_message() -> str:
        return (await rx.recv(4096)).decode().strip()

    seen: list[str] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(systemd.run_watchdog, sd.notifier)
            await nursery.start(systemd.run_test_faults, sd.notifier, sd.faults, sd.wedge_seconds)
            for _ in range(3):
                seen.append(await next_message())
            os.kill(os.getpid(), signal.SIGUSR2)
            while "STATUS=test fault: event loop running again" not in seen:
                seen.append(await next_message())
            for _ in range(3):
                seen.append(await next_message())
            nursery.cancel_scope.cancel()
    rx.close()
    sd.notifier.close()

    begin = seen.index("STATUS=test fault: event loop wedged")
    end = seen.index("STATUS=test fault: event loop running again")
    assert seen[:3] == ["WATCHDOG=1"] * 3
    assert seen[begin + 1 : end] == []  # nothing at all while wedged
    assert seen[end + 1 :] == ["WATCHDOG=1"] * 3
    assert all(m == "WATCHDOG=1" for m in seen[3:begin])


async def test_faults_are_off_by_default() -> None:
    assert systemd.enabled_test_faults({}) == frozenset()
    assert systemd.enabled_test_faults({"MCPD_TEST_FAULTS": "nonsense"}) == frozenset()
    with trio.fail_after(5):
        await systemd.run_test_faults(systemd.Notifier(None), frozenset())


def test_scrub_environ_removes_systemd_main_process_variables() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/var/lib/mcpd",
        "INVOCATION_ID": "abc",
        "NOTIFY_SOCKET": "/run/systemd/notify",
        "WATCHDOG_USEC": "30000000",
        "WATCHDOG_PID": "12",
        "LISTEN_FDS": "1",
        "LISTEN_PID": "12",
        "LISTEN_FDNAMES": "api",
        "JOURNAL_STREAM": "8:1234",
        "SYSTEMD_EXEC_PID": "12",
        "MCPD_TEST_FAULTS": "wedge_on_sigusr2",
    }
    systemd.scrub_environ(env)
    assert env == {"PATH": "/usr/bin", "HOME": "/var/lib/mcpd", "INVOCATION_ID": "abc"}


def test_listen_fds_ignores_variables_meant_for_another_process() -> None:
    assert systemd.listen_fds({"LISTEN_FDS": "1", "LISTEN_PID": "1"}) == []
    assert systemd.listen_fds({"LISTEN_FDS": "1"}) == []
    assert systemd.listen_fds({}) == []


# The child owns its fd table, so placing the listening socket at fd 3 cannot disturb
# pytest. It serves one connection through the adopted trio listener, then reports.
_ACTIVATED_CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys
    import trio
    from mcpd.local.service import systemd

    os.dup2(int(sys.argv[1]), 3)
    os.close(int(sys.argv[1]))
    os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), LISTEN_FDNAMES="api",
                      NOTIFY_SOCKET="/nonexistent")

    async def main():
        sd = systemd.SystemdEnv.take()
        listener = systemd.adopt_listener(sd.sockets, name="api")
        stream = await listener.accept()
        await stream.send_all(b"hello from " + sd.sockets[0].name.encode() + b"\\n")
        await stream.aclose()
        await listener.aclose()
        child_env = subprocess.run(["env"], capture_output=True, text=True).stdout
        print(json.dumps({
            "names": [s.name for s in sd.sockets],
            "environ_clean": not any(k in os.environ for k in systemd.MAIN_PROCESS_ONLY_VARS),
            "child_sees": [k for k in systemd.MAIN_PROCESS_ONLY_VARS if k + "=" in child_env],
            "wrong_name": systemd.adopt_listener(sd.sockets, name="other") is None,
        }))

    trio.run(main)
    """
)


def test_socket_activation_in_a_child_process(short_dir: Path) -> None:
    path = str(short_dir / "api.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    proc = subprocess.Popen(
        [sys.executable, "-c", _ACTIVATED_CHILD, str(server.fileno())],
        pass_fds=[server.fileno()],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    server.close()  # only the child holds it now
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10)
            client.connect(path)
            assert client.makefile("rb").readline() == b"hello from api\n"
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    report = json.loads(out)
    assert report["names"] == ["api"]
    assert report["environ_clean"]
    assert report["child_sees"] == []
    assert report["wrong_name"]


def test_listen_fds_marks_passed_sockets_close_on_exec(short_dir: Path) -> None:
    code = textwrap.dedent(
        """
        import os, socket, sys
        from mcpd.local.service import systemd
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sys.argv[1]); s.listen()
        if s.fileno() != 3:
            os.dup2(s.fileno(), 3)
        os.set_inheritable(3, True)  # as systemd passes it
        got = systemd.listen_fds({"LISTEN_FDS": "1", "LISTEN_PID": str(os.getpid())})
        assert [e.name for e in got] == ["unknown"]
        assert not os.get_inheritable(3)
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(short_dir / "s")],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_a_status_line_the_manager_has_no_room_for_waits_for_the_next_notification(
    short_dir: Path,
) -> None:
    path = str(short_dir / "notify")
    with _dgram_receiver(path) as rx:
        n = systemd.Notifier(path)
        # A manager that is not reading: its queue fills (net.unix.max_dgram_qlen).
        sent = 0
        while n.status(f"starting {sent}"):
            sent += 1
            assert sent < 10_000
        # More changes while it is full: none is waited for, and none is a failure
        # (waiting a second for each stalled the daemon a second per server).
        for i in range(50):
            assert not n.status(f"serving {i} of 50")
        assert n.failures == 0
        assert n.held == "STATUS=serving 49 of 50"
        queued = [_recv(rx) for _ in range(sent)]
        assert queued[0] == ["STATUS=starting 0"]
        # The next notification that goes out carries the newest line, once.
        assert n.watchdog()
        assert _recv(rx) == ["WATCHDOG=1", "STATUS=serving 49 of 50"]
        assert n.held is None
        assert n.watchdog()
        assert _recv(rx) == ["WATCHDOG=1"]
        n.close()
