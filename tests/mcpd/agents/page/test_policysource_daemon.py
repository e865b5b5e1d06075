"""The page's approvals and latest calls through a running daemon: a call the policy
holds waits on the page and Approve there lets it through (recorded as the page's
decision); an id nothing waits under is refused; the latest calls come from the audit
log, filtered by server and outcome; a profile's reader sees its own profile's calls
and no approvals."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.audit.reader import AuditRecords
from mcpd.config.loading.load import parse_config
from tests.support.cli.apart import APART
from tests.support.clients.agent import connect, running
from tests.support.clients.daemon_http import curl
from tests.support.page.http_session import http, session
from tests.support.system.procs import scripted

LIMIT = 60
BURST = str(Path(__file__).resolve().parents[3] / "support" / "clients" / "call_burst.py")


def config(tmp_path: Path) -> Any:
    def server(*flags: str) -> dict[str, Any]:
        command, args = scripted(*flags)
        return {"command": command, "args": list(args)}

    return parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "http_listen": "127.0.0.1:0",
                "audit_journal": False,
            },
            "servers": {
                "files": server("--names", "read,write"),
                "mail": server("--names", "send,fail"),
            },
            "profiles": {"mail": {"servers": ["mail"], "socket": str(tmp_path / "mail.sock")}},
            "policy": [{"tools": ["files/write"], "action": "ask", "reason": "writes need a look"}],
        }
    )


async def agent(sock: str, calls: list[Any]) -> dict[str, Any]:
    """Calls made by an agent started apart from the test, which is then not its host."""
    done = await trio.run_process(
        [*APART, sys.executable, BURST, sock, "default", "modern", json.dumps(calls)],
        capture_stdout=True,
        capture_stderr=True,
    )
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def waiting_ids(page: bytes) -> list[str]:
    return [m.decode() for m in re.findall(rb'data-waits="approval" data-id="([^"]+)"', page)]


def call_rows(page: bytes) -> list[tuple[str, str]]:
    """(tool, outcome) of each row of the latest calls."""
    section = page.split(b'<section id="calls">', 1)[1].split(b"</section>", 1)[0]
    found = re.findall(
        rb"<tr><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td><td>[^<]*</td>"
        rb'<td><span class="pill [a-z]+">([^<]*)</span>',
        section,
    )
    return [(t.decode(), o.decode()) for t, o in found]


async def test_an_approval_clicked_on_the_page_lets_the_call_through(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            own = f"http://127.0.0.1:{port}"
            cookie, csrf = await session(port, daemon.socket_path)
            acting = {"Cookie": cookie, "Origin": own, "X-Mcpd-Csrf": csrf}
            acting["Accept"] = "application/json"
            got: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    # An agent of its own, in a session of its own: not the process
                    # (nor the terminal) that opened the page.
                    calls = [["mcp__files__write", {"text": "page"}]]
                    got.append(await agent(daemon.socket_path, calls))

                nursery.start_soon(call)
                approvals = daemon.approvals
                while not approvals.list():
                    await approvals.wait_change(approvals.version)
                page = (await http(port, "GET", "/", {"Cookie": cookie})).body
                [wid] = waiting_ids(page)
                assert b"mcp__files__write" in page and b"asks for approval" in page
                unknown = await http(port, "POST", "/page/decide", acting, b"id=nope&decision=deny")
                assert unknown.status == 409
                assert "no call waits for approval under 'nope'" in unknown.json()["error"]
                body = f"id={wid}&decision=approve".encode()
                done = await http(port, "POST", "/page/decide", acting, body)
                assert done.status == 200, done.body
                assert done.json()["message"].startswith("approved files/write for pid ")
            assert got[0]["results"] == [{"error": False, "is_error": False}]
            after = (await http(port, "GET", "/", {"Cookie": cookie})).body
            assert waiting_ids(after) == []
            assert ("mcp__files__write", "ok") in call_rows(after)
            await daemon.audit.flush()
    [record] = list(AuditRecords(str(tmp_path / "state")))
    assert (record.decision, record.decided_by) == ("approved", "the status page")


async def test_the_latest_calls_are_filtered_and_a_profile_sees_its_own(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            sock = daemon.socket_path
            async with connect(sock) as agent:
                await agent.call("mcp__files__read")
                await agent.call("mcp__mail__send")
                await agent.call("mcp__mail__fail")
            async with connect(str(tmp_path / "mail.sock")) as mailer:
                await mailer.call("mcp__mail__send", {"text": "from the profile"})
            every = call_rows((await curl(sock, "/")).body)
            assert every == [
                ("mcp__mail__send", "ok"),
                ("mcp__mail__fail", "tool error"),
                ("mcp__mail__send", "ok"),
                ("mcp__files__read", "ok"),
            ]
            mail = call_rows((await curl(sock, "/?server=mail")).body)
            assert [t for t, _ in mail] == ["mcp__mail__send", "mcp__mail__fail", "mcp__mail__send"]
            failed = call_rows((await curl(sock, "/?outcome=tool+error")).body)
            assert failed == [("mcp__mail__fail", "tool error")]
            # The profile's reader: its profile's agents' calls, and no approvals.
            theirs = (await curl(str(tmp_path / "mail.sock"), "/")).body
            assert call_rows(theirs) == [("mcp__mail__send", "ok")]
            assert b"approval" not in theirs


async def test_a_page_opened_by_the_agent_cannot_decide_its_call(tmp_path: Path) -> None:
    """The code of ``mcpd dashboard`` remembers who asked for it: an agent that opens the
    page itself (a shell tool of its host, say) cannot approve its own call there."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            cookie, csrf = await session(port, daemon.socket_path)  # this process's
            acting = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
            acting.update({"X-Mcpd-Csrf": csrf, "Accept": "application/json"})
            async with connect(daemon.socket_path) as agent, trio.open_nursery() as nursery:
                nursery.start_soon(agent.call, "mcp__files__write", {"text": "mine"})
                approvals = daemon.approvals
                while not approvals.list():
                    await approvals.wait_change(approvals.version)
                [waiting] = approvals.list()
                body = f"id={waiting.id}&decision=approve".encode()
                refused = await http(port, "POST", "/page/decide", acting, body)
                assert refused.status == 409
                said = refused.json()["error"]
                assert "or is used, from the agent that made this call" in said
                assert "cannot decide it" in said and "another terminal" in said
                assert [v.id for v in approvals.list()] == [waiting.id]  # still waiting
                nursery.cancel_scope.cancel()
