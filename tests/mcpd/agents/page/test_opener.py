"""Who opened a page's session, through a running daemon: a page that an agent's shell
tool opens (it asks for the address, or trades one a person asked for) shows what
waits, says why it decides none of it, and decides neither the agent's call nor
another agent's, nor approves a held change, while a person's page from a terminal of
their own does both; a person's session whose cookie the agent's shell sends decides
nothing of it either; an agent that connects after a page was opened is held against
who opened it when the page acts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import trio

from mcpd.config.loading.load import parse_config
from mcpd.daemon import Daemon
from tests.support.clients import self_approval
from tests.support.clients.agent import connect, running
from tests.support.daemons.pins import Changing, cli
from tests.support.page.http_session import code_url, forms, http, session
from tests.support.system.procs import scripted

LIMIT = 90
WRITE = "mcp__files__write"
NOT_DEFINITIONS = "an agent must not approve what its servers' definitions say"


def config(tmp_path: Path) -> Any:
    command, args = scripted("--names", "read,write")
    return parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "http_listen": "127.0.0.1:0",
                "audit_journal": False,
                "hold_new_servers": True,
                "startup_deadline": 20.0,
            },
            "servers": {
                "files": {"command": command, "args": list(args)},
                "tickets": Changing(tmp_path).config(),
            },
            "policy": [{"tools": ["files/write"], "action": "ask"}],
        }
    )


async def started(daemon: Daemon) -> int:
    """The endpoint's port, once ``files`` is approved (by a person) and ``tickets``,
    new to mcpd, is held."""
    code, _, err = await cli(daemon.socket_path, "approve", "files", "--yes")
    assert code == 0, err
    assert daemon.agent_server.endpoint is not None
    return daemon.agent_server.endpoint.port


async def a_call_waits(daemon: Daemon) -> None:
    approvals = daemon.approvals
    while not approvals.list():
        await approvals.wait_change(approvals.version)


def held(daemon: Daemon) -> list[str]:
    return sorted(f"{p['kind']} {p['name']}" for p in daemon.pins.pending("tickets"))


class PersonsPage:
    """A page opened from a terminal no agent started or runs in."""

    def __init__(self, port: int, cookie: str, csrf: str) -> None:
        self.port = port
        self.cookie = cookie
        self.headers = {
            "Cookie": cookie,
            "Origin": f"http://127.0.0.1:{port}",
            "X-Mcpd-Csrf": csrf,
            "Accept": "application/json",
        }

    async def approve_all(self, action: str) -> list[tuple[int, dict[str, Any]]]:
        page = (await http(self.port, "GET", "/", {"Cookie": self.cookie})).body
        answers = []
        for fields in forms(page, f"/page/{action}"):
            if fields.get("decision", "approve") == "approve":
                body = urlencode(fields).encode()
                done = await http(self.port, "POST", f"/page/{action}", self.headers, body)
                answers.append((done.status, done.json()))
        return answers


async def persons_page(port: int, sock: str) -> PersonsPage:
    return PersonsPage(port, *await session(port, sock))


def refusals(out: str) -> tuple[str | None, list[str]]:
    """The note of the page ``page.client`` read, and each refusal it was answered."""
    said = json.loads(out)
    errors = []
    for answer in said["answers"]:
        assert answer["status"] == 409, answer
        errors.append(answer["said"]["error"])
    return said["note"], errors


async def test_a_page_an_agents_shell_opens_shows_but_decides_nothing_of_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            port = await started(daemon)
            sock = daemon.socket_path
            before = held(daemon)
            assert before
            async with self_approval.agent("call", sock, WRITE, apart=True) as agent:
                await a_call_waits(daemon)
                code, out = await agent.runs("page", "-", "decide", "release")
                assert code == 0, out
                note, errors = refusals(out)
                assert note is not None and "in the session of an agent connected to mcpd" in note
                assert "another terminal" in note
                decided, *released = errors
                assert "in the same session as the agent that made this call" in decided
                assert "cannot decide it" in decided and "another terminal" in decided
                assert len(released) == len(before)
                assert all(NOT_DEFINITIONS in r and "another terminal" in r for r in released)
                assert len(daemon.approvals.list()) == 1 and held(daemon) == before
                # A person's page, opened from a terminal of their own, decides both.
                person = await persons_page(port, sock)
                assert [s for s, _ in await person.approve_all("decide")] == [200]
                released_by_person = await person.approve_all("release")
                assert [s for s, _ in released_by_person] == [200] * len(before)
            assert held(daemon) == []


async def test_a_page_an_agents_shell_opens_decides_no_other_agents_call(
    tmp_path: Path,
) -> None:
    """The call of another agent is no more for the page of an agent's side than for its
    terminal: refused, the call still waits, and a person's page decides it."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            port = await started(daemon)
            sock = daemon.socket_path
            async with (
                self_approval.agent("asking", sock, WRITE, apart=True),
                self_approval.agent("socket", sock, apart=True) as other,
            ):
                await a_call_waits(daemon)
                code, out = await other.runs("page", "-", "decide")
                assert code == 0, out
                note, [decided] = refusals(out)
                assert note is not None and "decides no call" in note
                assert "an agent must not decide calls that wait for a person" in decided
                assert "another terminal" in decided
                assert len(daemon.approvals.list()) == 1
                person = await persons_page(port, sock)
                assert [s for s, _ in await person.approve_all("decide")] == [200]


async def test_a_code_a_person_asked_for_is_no_use_to_an_agent(tmp_path: Path) -> None:
    """A code is a bearer secret: one that reaches the agent (pasted into its chat, say)
    opens a session in the agent's hands, and that session decides nothing of it."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            await started(daemon)
            sock = daemon.socket_path
            before = held(daemon)
            url = await code_url(sock)  # this process's, apart from any agent
            async with self_approval.agent("call", sock, WRITE, apart=True) as agent:
                await a_call_waits(daemon)
                code, out = await agent.runs("page", url, "decide", "release")
                assert code == 0, out
                note, errors = refusals(out)
                assert note is not None and "in the session of an agent connected to mcpd" in note
                decided, *released = errors
                assert "in the same session as the agent that made this call" in decided
                assert all(NOT_DEFINITIONS in r for r in released)
                assert len(daemon.approvals.list()) == 1 and held(daemon) == before


async def test_a_session_a_person_opened_is_no_use_to_an_agent_that_takes_its_cookie(
    tmp_path: Path,
) -> None:
    """A session's cookie is a bearer secret too (a program of the user can read the
    browser's files): who sends a decision is held to the rule as well."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            port = await started(daemon)
            sock = daemon.socket_path
            before = held(daemon)
            person = await persons_page(port, sock)
            async with self_approval.agent("call", sock, WRITE, apart=True) as agent:
                await a_call_waits(daemon)
                taken = f"session:{port}:{person.cookie}"
                code, out = await agent.runs("page", taken, "decide", "release")
                assert code == 0, out
                note, errors = refusals(out)
                assert note is None  # the person opened it
                decided, *released = errors
                assert "in the same session as the agent that made this call" in decided
                assert all(NOT_DEFINITIONS in r for r in released)
                assert len(daemon.approvals.list()) == 1 and held(daemon) == before
                # In the person's own hands, the same session decides.
                assert [s for s, _ in await person.approve_all("decide")] == [200]


async def test_an_agent_that_connects_after_the_page_opened_is_checked_as_it_acts(
    tmp_path: Path,
) -> None:
    """The page was opened from this process before it was an agent: once it is one,
    the page approves no held change, nor once it has disconnected, since this
    process that was the agent still runs."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            port = await started(daemon)
            sock = daemon.socket_path
            page = await persons_page(port, sock)
            async with connect(sock) as agent:
                await agent.call("mcp__files__read")
                [(status, said), *_] = await page.approve_all("release")
                assert status == 409
                assert f"is an agent connected to mcpd (pid {os.getpid()})" in said["error"]
                assert NOT_DEFINITIONS in said["error"]
            while daemon.agent_server.agent_connections():
                await trio.sleep(0.01)  # until the daemon has seen it hang up
            [(status, said), *_] = await page.approve_all("release")
            assert status == 409
            assert f"is an agent connected to mcpd (pid {os.getpid()})" in said["error"]
            assert held(daemon) != []
