from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from tests.support.system.procs import alive, read_pid, scripted, wait_gone
from transports.errors import SpawnError, TransportClosed, TransportError
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport


def params(*flags: str, **kw: object) -> StdioParams:
    command, args = scripted(*flags)
    return StdioParams(command=command, args=args, **kw)  # type: ignore[arg-type]


def text_of(raw: msgspec.Raw) -> str:
    return str(json.loads(bytes(raw))["content"][0]["text"])


async def call(t, text: str = "", name: str = "tool0") -> msgspec.Raw:  # type: ignore[no-untyped-def]
    return await t.request("tools/call", {"name": name, "arguments": {"text": text}})


async def test_many_requests_in_flight_each_get_their_own_answer() -> None:
    results: dict[int, str] = {}
    with trio.fail_after(20):
        async with open_stdio_transport("s", params("--slow", "0.05")) as t:

            async def one(i: int) -> None:
                results[i] = text_of(await call(t, f"n{i}"))

            async with trio.open_nursery() as n:
                for i in range(50):
                    n.start_soon(one, i)
    assert results == {i: f"tool0:n{i}" for i in range(50)}


async def test_garbage_lines_on_stdout_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("noisy", params("--garbage")) as t:
            assert text_of(await call(t, "a")) == "tool0:a"
            assert text_of(await call(t, "b")) == "tool0:b"
    assert any(
        "noisy" in r.getMessage() and "not JSON-RPC" in r.getMessage() for r in caplog.records
    )


async def test_a_log_line_on_stdout_starting_with_a_bracket_is_called_not_json(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("noisy", params("--noise", "[INFO] answering")) as t:
            assert text_of(await call(t, "a")) == "tool0:a"
    said = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert said and all("not JSON" in m and "batch" not in m for m in said), said


async def test_notifications_before_a_response_do_not_satisfy_it() -> None:
    seen: list[rpc.Notification] = []
    with trio.fail_after(10):
        async with open_stdio_transport(
            "s", params("--notify-before"), on_notification=seen.append
        ) as t:
            assert text_of(await call(t, "x")) == "tool0:x"
    assert len(seen) == 1
    assert seen[0].method == "notifications/message"


async def test_response_written_a_few_bytes_at_a_time() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--trickle")) as t:
            assert text_of(await call(t, "slowly")) == "tool0:slowly"


async def test_large_result_split_by_the_pipe() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--big", "20000")) as t:
            assert text_of(await call(t)) == "x" * 20000


async def test_late_response_after_timeout_is_dropped_and_the_transport_goes_on() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--slow", "0.3")) as t:
            with trio.move_on_after(0.05) as scope:
                await call(t, "late")
            assert scope.cancelled_caught
            # The late answer arrives while this one waits; it must not be taken for it.
            assert text_of(await call(t, "second")) == "tool0:second"
            assert t.error is None


class StderrWatch:
    """Collects a server's stderr lines and wakes a waiter when one matches."""

    def __init__(self, needle: str) -> None:
        self.needle = needle
        self.found = trio.Event()
        self.line = ""

    def __call__(self, line: str) -> None:
        if self.needle in line and not self.found.is_set():
            self.line = line
            self.found.set()


async def test_cancelled_request_tells_the_server() -> None:
    # The scripted server logs each cancellation it receives on stderr.
    watch = StderrWatch("cancelled")
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--hang-on-call"), on_stderr=watch) as t:
            with trio.move_on_after(0.2):
                await call(t)
            await watch.found.wait()
    assert "'requestId': 1" in watch.line


async def test_process_death_fails_every_pending_request_at_once() -> None:
    failures: list[TransportError] = []
    with trio.fail_after(10):
        async with open_stdio_transport("crashy", params("--die-on-call", "--slow", "0")) as t:

            async def one(i: int) -> None:
                try:
                    await call(t, str(i))
                except TransportError as exc:
                    failures.append(exc)

            async with trio.open_nursery() as n:
                for i in range(10):
                    n.start_soon(one, i)
    assert len(failures) == 10
    assert all(isinstance(f, TransportClosed) for f in failures)
    assert "crashy exited with status 3" in failures[0].reason
    assert "dying on purpose" in failures[0].detail


async def test_request_after_death_fails_immediately_with_the_reason() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("crashy", params("--die-on-call")) as t:
            with pytest.raises(TransportClosed):
                await call(t)
            with pytest.raises(TransportClosed, match="exited with status 3"):
                await call(t)


async def test_server_closing_stdout_fails_pending_requests() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--close-stdout-on-call")) as t:
            with pytest.raises(TransportClosed, match="closed its stdout"):
                await call(t)


async def test_missing_command_fails_immediately() -> None:
    with trio.fail_after(5), pytest.raises(SpawnError, match="command not found"):
        async with open_stdio_transport("ghost", StdioParams(command="/nonexistent/mcp-server")):
            pass


async def test_non_executable_command_fails_immediately(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with trio.fail_after(5), pytest.raises(SpawnError, match="permission denied"):
        async with open_stdio_transport("noexec", StdioParams(command=str(script))):
            pass


async def test_oversized_line_fails_its_request_not_the_transport() -> None:
    with trio.fail_after(10):
        p = params("--big", "5000", max_line=1000)
        async with open_stdio_transport("s", p) as t:
            with pytest.raises(MessageTooLarge, match="line limit") as info:
                await call(t)
            assert t.error is None
            # The size is known once the whole line has gone by.
            assert info.value.size is not None and info.value.size > 5000
            assert info.value.limit == 1000


async def test_server_ping_is_answered() -> None:
    watch = StderrWatch("client answered")
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--ping-first"), on_stderr=watch) as t:
            await t.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
            await watch.found.wait()
    assert "'id': 'srv-1'" in watch.line and "'result': {}" in watch.line


async def test_spawned_child_does_not_see_notify_socket(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    code = (
        f"import json,os,sys; json.dump(dict(os.environ), open({str(out)!r},'w'));"
        "print('written', file=sys.stderr, flush=True); sys.stdin.read()"
    )
    base = dict(os.environ, NOTIFY_SOCKET="/run/nope", WATCHDOG_PID="1")
    p = StdioParams(command=sys.executable, args=("-c", code), env={"EXTRA": "1"})
    with trio.fail_after(10):
        watch = StderrWatch("written")
        async with open_stdio_transport("envcheck", p, base_env=base, on_stderr=watch):
            await watch.found.wait()
    env = json.loads(out.read_text())
    assert "NOTIFY_SOCKET" not in env and "WATCHDOG_PID" not in env
    assert env["EXTRA"] == "1"


async def test_shutdown_leaves_no_child_or_grandchild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pidfile = tmp_path / "pid"
    with trio.fail_after(20):
        async with open_stdio_transport(
            "s", params("--grandchild", "--pid-file", str(pidfile), stdin_grace=0.5)
        ) as t:
            assert text_of(await call(t, "hi")) == "tool0:hi"
            pid = await read_pid(pidfile)
            grandchild = await read_pid(Path(str(pidfile) + ".child"))
            assert alive(pid) and alive(grandchild)
        assert await wait_gone(pid)
        assert await wait_gone(grandchild)
    # It went with the group: not a process that had left it.
    assert not [r for r in caplog.records if "left its process group" in r.getMessage()]


async def test_server_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    p = params(
        "--ignore-sigterm", "--linger", "--pid-file", str(pidfile), stdin_grace=0.2, term_grace=0.3
    )
    with trio.fail_after(10):
        async with open_stdio_transport("stubborn", p) as t:
            pid = await read_pid(pidfile)
        assert t.process.returncode == -signal.SIGKILL
        assert not alive(pid)


@pytest.mark.parametrize("arming", ["setpriv", "preexec"])
async def test_direct_children_die_with_a_killed_parent(tmp_path: Path, arming: str) -> None:
    # Both ways the signal is armed: through setpriv where it is installed, and from
    # the forked child itself where it is not.
    if arming == "setpriv" and shutil.which("setpriv") is None:
        pytest.skip("no setpriv on this machine")
    pidfile = tmp_path / "pid"
    command, args = scripted("--pid-file", str(pidfile))
    parent_code = textwrap.dedent(f"""
        import trio, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
        from transports.stdio.process import launch
        if {arming!r} == "preexec":
            launch._setpriv[:] = [None]
        from transports.stdio.params import StdioParams
        from transports.stdio.transport import open_stdio_transport
        async def main():
            p = StdioParams(command={command!r}, args={list(args)!r})
            async with open_stdio_transport("orphan-test", p):
                await trio.sleep_forever()
        trio.run(main)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        child = await read_pid(pidfile)
        assert alive(child)
        parent.kill()
        parent.wait()
        assert await wait_gone(child), "the stdio child outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.slow
async def test_children_outlive_idle_trio_worker_threads(tmp_path: Path) -> None:
    # PR_SET_PDEATHSIG follows the thread that forked the child. trio retires idle
    # worker threads after 10 s, so a child forked from one would be killed then.
    pidfile = tmp_path / "pid"
    with trio.fail_after(30):
        async with open_stdio_transport("s", params("--pid-file", str(pidfile))) as t:
            pid = await read_pid(pidfile)
            await trio.to_thread.run_sync(lambda: None)  # use (and later retire) a worker
            await trio.sleep(11)
            assert alive(pid)
            assert text_of(await call(t, "still here")) == "tool0:still here"


async def test_a_server_dying_while_mcpd_is_cancelled_leaves_only_the_cancellation() -> None:
    # Cancelled from outside while the body fails with the transport's error: the
    # surrounding scope must see a plain cancellation, not a group it cannot absorb.
    with trio.move_on_after(5) as outer:
        async with open_stdio_transport("s", params("--die-on-call")) as t:
            outer.cancel()
            try:
                await call(t)
            except trio.Cancelled:
                raise TransportClosed("died while stopping") from None
    assert outer.cancelled_caught


async def test_a_burst_of_stderr_is_one_log_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A traceback written at once, a pause, then one more line: two records, not six.
    code = textwrap.dedent(
        """
        import sys, time
        sys.stderr.write("Traceback (most recent call last):\\n"
                         '  File "server.py", line 3, in <module>\\n'
                         "    start()\\n"
                         "    ^^^^^^^\\n"
                         "RuntimeError: no config\\n")
        sys.stderr.flush()
        time.sleep(0.5)
        sys.stderr.write("retrying without one\\n")
        sys.stderr.flush()
        sys.stdin.read()
        """
    )
    p = StdioParams(command=sys.executable, args=("-c", code))
    with trio.fail_after(10), caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with open_stdio_transport("noisy", p) as t:
            while len(t.stderr_tail()) < 6:
                await trio.sleep(0.02)
            while len([r for r in caplog.records if r.name == "mcpd.stdio"]) < 2:
                await trio.sleep(0.02)
    records = [r for r in caplog.records if r.name == "mcpd.stdio"]
    assert [r.getMessage().splitlines()[0] for r in records] == [
        "Traceback (most recent call last):",
        "retrying without one",
    ]
    assert records[0].getMessage().splitlines()[-1] == "RuntimeError: no config"
    assert len(records[0].getMessage().splitlines()) == 5
    assert all(getattr(r, "mcpd_event", None) == "stderr" for r in records)
    assert all(getattr(r, "mcpd_server", None) == "noisy" for r in records)


@pytest.mark.parametrize(
    ("kind", "why"),
    [("utf8", "not valid UTF-8"), ("deep", "nested too deeply"), ("json", "not JSON")],
)
async def test_an_unreadable_reply_fails_only_its_call_at_once(kind: str, why: str) -> None:
    # Its id is still plain to see: waiting out the time limit helped nobody, and the
    # timeout it ended in invited the same call again.
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--malformed-reply", kind)) as t:
            with pytest.raises(MalformedReply, match=why) as caught:
                await call(t)
            assert caught.value.reason == f"s: the reply was {why} and was dropped"
            assert t.error is None  # the server goes on
            assert await t.request("ping", None) is not None


async def test_a_broken_request_from_the_server_fails_none_of_ours() -> None:
    # The server's own requests have ids of their own, which may equal one of ours.
    with trio.fail_after(10):
        async with open_stdio_transport("s", params("--malformed-reply", "request")) as t:
            assert text_of(await call(t, "x")) == "tool0:x"


async def test_requests_waiting_when_the_owner_gives_up_are_told_its_reason() -> None:
    # A server that stopped reading its stdin: what its waiting requests learn is why
    # it was given up on, not that the pipe mcpd was stuck writing to was then closed.
    why = "deaf stopped responding (a probe got no answer in 5 s)"
    errors: list[Exception | None] = []
    with trio.fail_after(10):
        with pytest.raises(TransportError, match="stopped responding"):
            async with open_stdio_transport("deaf", params("--deaf", stdin_grace=1.0)) as t:
                big = {"name": "tool0", "arguments": {"text": "x" * 300_000}}
                t.send("tools/call", big, lambda _raw, error: errors.append(error))
                await trio.testing.wait_all_tasks_blocked()  # the write is stuck
                raise TransportError(why)
    assert len(errors) == 1 and isinstance(errors[0], TransportError)
    assert errors[0].reason == why


async def test_a_helper_that_left_the_process_group_goes_with_its_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # setsid() takes it out of the group the stop signals and out of PR_SET_PDEATHSIG's
    # reach; its environment still says which start it came from.
    pid_file = tmp_path / "helper.pid"
    helper = 0
    try:
        with trio.fail_after(20):
            async with open_stdio_transport(
                "s", params("--setsid-helper", str(pid_file), term_grace=1.0)
            ) as t:
                helper = await read_pid(pid_file)
                assert os.getsid(helper) != os.getsid(t.pid)
                assert text_of(await call(t, "x")) == "tool0:x"
            assert await wait_gone(helper, 5)
        said = [
            r.getMessage() for r in caplog.records if "left its process group" in r.getMessage()
        ]
        assert said == [
            f"s: 1 process(es) it started had left its process group and were "
            f"still running (pids {helper}); stopping them"
        ]
    finally:
        if helper and alive(helper):
            os.kill(helper, signal.SIGKILL)
