"""``mcpd approvals`` as a person runs it (real processes) against a running daemon:
listing, approving, denying and watching the calls that wait, in ``mcpd status`` too;
and who may not decide: another user, an agent over the HTTP endpoint, the agent that
asked. The waiting calls are put in the daemon's registry directly, as the call path
will: what is tested here is the socket methods and the command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.daemon import Daemon
from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin, Process
from mcpd.policy.waiting.approvals import ApprovalRequest, Verdict
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import MCP, auth, header_dict, http, modern, modern_headers
from tests.support.system.peer_user import ONE_REQUEST, needs_root, peer_uid, run_as, shared_dir

LIMIT = 30
ROOT = Path(__file__).resolve().parents[3]
# A process that cannot exist: no command this test runs descends from it.
ELSEWHERE = 2**22 + 7
AGENT = AgentInfo(uid=1000, pid=ELSEWHERE, exe="claude", profile="default", connection="c9")


async def mcpd(socket: str, *argv: str) -> tuple[int, str]:
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", socket],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    return proc.returncode, (proc.stdout + proc.stderr).decode()


def request(original: str, agent: AgentInfo = AGENT) -> ApprovalRequest:
    return ApprovalRequest(
        agent=agent,
        kin=AgentKin(agents=() if agent.pid is None else (Process(agent.pid),)),
        tool=f"mcp__github__{original}",
        server="github",
        original=original,
        arguments='{"repo": "mcpd", "title": "\\u001b[31mred"}',
        rule=1,
        reason="changes need a person",
    )


class Held:
    """Calls held in the daemon's approvals registry, each waiting in a task."""

    def __init__(self, daemon: Daemon, nursery: trio.Nursery) -> None:
        self.daemon = daemon
        self.nursery = nursery
        self.verdicts: dict[str, Verdict] = {}

    async def hold(self, original: str, agent: AgentInfo = AGENT) -> str:
        """Hold one call; its id once it waits."""
        approvals = self.daemon.approvals
        before = {v.id for v in approvals.list()}

        async def wait() -> None:
            self.verdicts[original] = await approvals.ask(request(original, agent), 120)

        self.nursery.start_soon(wait)
        while True:
            new = {v.id for v in approvals.list()} - before
            if new:
                return new.pop()
            await approvals.wait_change(approvals.version)

    async def decided(self, original: str) -> Verdict:
        while original not in self.verdicts:
            await self.daemon.approvals.wait_change(self.daemon.approvals.version)
        return self.verdicts[original]


@asynccontextmanager
async def daemon_with_held(tmp_path: Path, **daemon: Any) -> AsyncIterator[Held]:
    config = make_config(tmp_path, {}, state_dir=str(tmp_path / "state"), **daemon)
    async with running(config) as d, trio.open_nursery() as nursery:
        yield Held(d, nursery)
        nursery.cancel_scope.cancel()


async def test_list_approve_and_deny(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with_held(tmp_path) as held:
            sock = held.daemon.socket_path
            code, out = await mcpd(sock, "approvals")
            assert (code, out.strip()) == (0, "no call waits for approval")
            create = await held.hold("create_issue")
            merge = await held.hold("merge")
            code, out = await mcpd(sock, "approvals")
            assert code == 0, out
            lines = out.splitlines()
            assert lines[0].split() == ["ID", "WAITING", "LEFT", "AGENT", "TOOL"]
            at = next(n for n, line in enumerate(lines) if line.startswith(create))
            row, arguments = lines[at : at + 2]
            assert f"pid {ELSEWHERE} (claude), uid 1000, default" in row
            assert "github/create_issue" in row and arguments.startswith('  {"repo": "mcpd"')
            assert "\x1b" not in out  # what the agent sent cannot drive the terminal
            assert f"{create}: changes need a person" in out
            assert "2 waiting" in out

            code, out = await mcpd(sock, "approvals", "--json")
            listed = json.loads(out)
            assert [i["original"] for i in listed] == ["create_issue", "merge"]
            assert listed[0]["agent"]["pid"] == ELSEWHERE and listed[0]["asked"] == "operator"

            code, out = await mcpd(sock, "approvals", "approve", create)
            assert code == 0, out
            me = f"uid {os.getuid()}"
            assert out.startswith(f"approved {create}: github/create_issue for pid {ELSEWHERE}")
            verdict = await held.decided("create_issue")
            assert (verdict.outcome, verdict.by.startswith(me)) == ("approved", True)

            code, out = await mcpd(sock, "approvals", "deny", merge, "--reason", "not today")
            assert code == 0 and out.startswith(f"denied {merge}"), out
            verdict = await held.decided("merge")
            assert (verdict.outcome, verdict.reason) == ("denied", "not today")

            code, out = await mcpd(sock, "approvals", "approve", merge)
            assert code == 1 and f"no call waits for approval under '{merge}'" in out
            code, out = await mcpd(sock, "approvals", "approve")
            assert code == 2 and "needs the call's ID" in out


async def test_the_agent_that_asked_cannot_decide(tmp_path: Path) -> None:
    """The agent's own process (here: this test, whose child runs the command) is the
    one thing that must not be able to approve what it asked for."""
    with trio.fail_after(LIMIT):
        async with daemon_with_held(tmp_path) as held:
            me = AgentInfo(uid=os.getuid(), pid=os.getpid(), connection="c1")
            mine = await held.hold("delete_repo", me)
            code, out = await mcpd(held.daemon.socket_path, "approvals", "approve", mine)
            assert code == 1
            assert f"the agent that made this call (pid {os.getpid()})" in out
            assert "cannot decide it; decide it from a terminal of your own" in out
            assert [v.id for v in held.daemon.approvals.list()] == [mine]


async def test_the_status_shows_what_waits(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with_held(tmp_path) as held:
            sock = held.daemon.socket_path
            waiting = await held.hold("create_issue")
            code, out = await mcpd(sock, "status", "--json")
            assert code == 0, out
            status = json.loads(out)
            assert [a["id"] for a in status["approvals"]] == [waiting]
            assert status["audit"]["file"] == str(tmp_path / "state" / "calls.jsonl")
            code, out = await mcpd(sock, "status")
            assert code == 0 and "1 call(s) wait for approval" in out and "`mcpd approvals`" in out


async def _line(proc: trio.Process, buf: bytearray) -> Any:
    assert proc.stdout is not None
    while b"\n" not in buf:
        chunk = await proc.stdout.receive_some(65536)
        assert chunk, f"mcpd approvals --watch ended: {buf!r}"
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


async def test_watch_shows_each_change(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with_held(tmp_path) as held:
            argv = ["approvals", "--watch", "--json", "--socket", held.daemon.socket_path]
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "mcpd", *argv], stdout=subprocess.PIPE, cwd=ROOT
            )
            buf = bytearray()
            try:
                assert await _line(proc, buf) == []
                waiting = await held.hold("create_issue")
                assert [i["id"] for i in await _line(proc, buf)] == [waiting]
                held.daemon.approvals.decide(waiting, False, "test")
                assert await _line(proc, buf) == []
            finally:
                proc.send_signal(signal.SIGINT)
                assert await proc.wait() == 0


async def test_an_agent_over_the_http_endpoint_cannot_decide(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with_held(tmp_path, http_listen="127.0.0.1:0") as held:
            waiting = await held.hold("create_issue")
            endpoint = held.daemon.agent_server.endpoint
            assert endpoint is not None
            headers = {**MCP, **auth(held.daemon.http_token())}
            for method, params in (
                ("mcpd/approvals/list", {}),
                ("mcpd/approvals/decide", {"id": waiting, "approve": True}),
            ):
                body = json.dumps(modern(1, method, params)).encode()
                named = {**headers, **header_dict(modern_headers(method))}
                reply = await http(endpoint.port, "POST", "/mcp", named, body)
                assert (
                    "only for the daemon's user and root, on its Unix socket"
                    in (reply.json()["error"]["message"])
                )
            assert [v.id for v in held.daemon.approvals.list()] == [waiting]


@needs_root
async def test_another_user_cannot_see_or_decide(tmp_path: Path) -> None:
    uid = peer_uid()
    sock = shared_dir() / "mcpd.sock"
    with trio.fail_after(LIMIT):
        async with daemon_with_held(
            tmp_path, socket=str(sock), socket_mode="0666", allow_uids=[uid]
        ) as held:
            await held.hold("create_issue")
            for method in ("mcpd/approvals/list", "mcpd/approvals/decide"):
                answer = json.loads(await run_as(uid, ONE_REQUEST, str(sock), method))
                assert answer["error"]["message"] == (
                    f"{method} is only for the daemon's user and root, on its Unix socket"
                )
            assert len(held.daemon.approvals.list()) == 1


@pytest.mark.parametrize("argv", [["deny"], ["approve", "x", "--watch"], ["--reason", "r"]])
async def test_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    code, out = await mcpd(str(tmp_path / "none.sock"), "approvals", *argv)
    assert code == 2, out
