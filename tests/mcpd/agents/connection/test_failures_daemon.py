"""A request whose handling raises what nothing expected (a fault in mcpd) costs that
request alone, through a running daemon, in both eras: its agent gets an internal error
that names the exception's type and nothing of its text, the connection serves its
next requests, another agent connected meanwhile is served throughout, the daemon runs
on, the log holds the traceback once, and a tools/call's audit record says ``error``.
A notification that raises is logged and dropped."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.beyond_tools import extra_methods
from mcpd.agents.calls.toolcall import Router
from mcpd.agents.connection.agent_connection import Connection
from mcpd.agents.connection.failures import Failures
from mcpd.audit.reader import AuditRecords
from mcpd.daemon import Daemon
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.clients.daemon_http import modern, modern_headers, post
from tests.support.parts.calls import cancelled
from tests.support.system.procs import scripted

SECRET = "sk-live-not-for-agents"
BROKEN = "mcp__s__tool1"  # the tool whose way raises; tool0 works throughout
ASKS = {"elicitation": {}}  # an agent a server may ask things: its calls run in a task


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mcpd.agents" and r.exc_info is not None]


@contextlib.asynccontextmanager
async def daemon_and_agents(
    tmp_path: Path, modern: bool, asks: bool = False
) -> AsyncIterator[tuple[Daemon, Agent, Agent]]:
    """A daemon with one server, the agent whose request fails, and a bystander."""
    command, args = scripted("--prompts", "1")
    cfg = make_config(
        tmp_path,
        {"s": {"command": command, "args": list(args)}},
        state_dir=str(tmp_path / "state"),
        audit_journal=False,
    )
    async with (
        running(cfg) as daemon,
        connect(daemon.socket_path, modern) as agent,
        connect(daemon.socket_path) as bystander,
    ):
        if not modern:
            caps = ASKS if asks else {}
            await agent.result(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": caps,
                    "clientInfo": {"name": "legacy-agent", "version": "0"},
                },
            )
            await agent.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        assert text(await bystander.call("mcp__s__tool0", {"text": "before"})) == "tool0:before"
        yield daemon, agent, bystander


async def call(agent: Agent, name: str, asks: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": "x"}}
    if asks and agent.modern:
        params["_meta"] = {"io.modelcontextprotocol/clientCapabilities": ASKS}
    return await agent.rpc("tools/call", params)


def assert_internal_error(reply: dict[str, Any], kind: str) -> None:
    error = reply["error"]
    assert error["code"] == rpc.INTERNAL_ERROR
    assert f"mcpd failed on this request ({kind})" in error["message"]
    assert SECRET not in json.dumps(reply) and "Traceback" not in json.dumps(reply)


async def served_on(daemon: Daemon, agent: Agent, bystander: Agent) -> None:
    """The failing agent's connection, the bystander and a new agent are all served."""
    assert text(await agent.call("mcp__s__tool0", {"text": "after"})) == "tool0:after"
    assert text(await bystander.call("mcp__s__tool0", {"text": "after"})) == "tool0:after"
    async with connect(daemon.socket_path) as newcomer:
        assert "result" in await newcomer.rpc("ping")
    assert agent.unmatched == [] and not agent.closed.is_set()


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "legacy"])
@pytest.mark.parametrize(
    ("where", "asks"),
    [("route", False), ("reply", False), ("route", True), ("reply", True)],
    ids=["routing", "replying", "routing-in-a-task", "replying-in-a-task"],
)
async def test_a_tools_call_that_raises_is_answered_with_an_internal_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    modern: bool,
    where: str,
    asks: bool,
) -> None:
    """Raised on the way to its server (routing) or on the way back (its reply), for
    a call started without a task and one awaited in a task (its agent may be asked)."""
    caplog.set_level(logging.ERROR, logger="mcpd.agents")
    route, reply = Router.route, Router.reply

    def broken_route(self: Router, call: Any) -> Any:
        if call.out.name == BROKEN:
            raise TypeError(SECRET)
        return route(self, call)

    def broken_reply(self: Router, call: Any, outcome: Any, *rest: Any) -> Any:
        if call.out.name == BROKEN:
            raise TypeError(SECRET)
        return reply(self, call, outcome, *rest)

    if where == "route":
        monkeypatch.setattr(Router, "route", broken_route)
    else:
        monkeypatch.setattr(Router, "reply", broken_reply)
    with trio.fail_after(30):
        async with daemon_and_agents(tmp_path, modern, asks) as (daemon, agent, bystander):
            assert_internal_error(await call(agent, BROKEN, asks), "TypeError")
            await served_on(daemon, agent, bystander)
            await daemon.audit.flush()
    [logged] = failures(caplog)
    assert logged.exc_info is not None and logged.exc_info[0] is TypeError
    assert "tools/call" in logged.getMessage()
    records = [r for r in AuditRecords(str(tmp_path / "state")) if r.name == BROKEN]
    assert [(r.outcome, r.reason) for r in records] == [("error", "mcpd failed: TypeError")]


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "legacy"])
async def test_a_prompts_get_that_raises_is_answered_with_an_internal_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    modern: bool,
) -> None:
    caplog.set_level(logging.ERROR, logger="mcpd.agents")

    async def broken_get(*args: Any, **kwargs: Any) -> bytes:
        raise KeyError(SECRET)

    monkeypatch.setattr(extra_methods, "get_prompt", broken_get)
    with trio.fail_after(30):
        async with daemon_and_agents(tmp_path, modern) as (daemon, agent, bystander):
            [prompt] = (await agent.result("prompts/list"))["prompts"]
            got = await agent.rpc("prompts/get", {"name": prompt["name"]})
            assert_internal_error(got, "KeyError")
            assert [p["name"] for p in (await agent.result("prompts/list"))["prompts"]] == [
                prompt["name"]
            ]
            await served_on(daemon, agent, bystander)
            await daemon.audit.flush()
    [logged] = failures(caplog)
    assert logged.exc_info is not None and logged.exc_info[0] is KeyError
    assert "prompts/get" in logged.getMessage()
    records = [r for r in AuditRecords(str(tmp_path / "state")) if r.method == "prompts/get"]
    assert [(r.outcome, r.reason) for r in records] == [("error", "mcpd failed: KeyError")]


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "legacy"])
async def test_a_notification_that_raises_is_logged_and_dropped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    modern: bool,
) -> None:
    caplog.set_level(logging.ERROR, logger="mcpd.agents")
    notification = Connection._notification

    def broken_notification(self: Connection, msg: rpc.Notification) -> None:
        if msg.method == "notifications/cancelled":
            raise RuntimeError(SECRET)
        notification(self, msg)

    monkeypatch.setattr(Connection, "_notification", broken_notification)
    with trio.fail_after(30):
        async with daemon_and_agents(tmp_path, modern) as (daemon, agent, bystander):
            await agent.send_raw(
                b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                b'"params":{"requestId":"none"}}\n'
            )
            # Read in order: the ping's answer comes after whatever the line made.
            assert "result" in await agent.rpc("ping")
            await served_on(daemon, agent, bystander)
    [logged] = failures(caplog)
    assert logged.exc_info is not None and logged.exc_info[0] is RuntimeError
    assert "notifications/cancelled" in logged.getMessage() and "dropped" in logged.getMessage()


async def test_an_http_request_that_raises_is_answered_and_its_connection_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On /mcp too: an answer, not a connection dropped without one."""
    caplog.set_level(logging.ERROR, logger="mcpd.agents")
    route = Router.route

    def broken_route(self: Router, call: Any) -> Any:
        if call.out.name == BROKEN:
            raise TypeError(SECRET)
        return route(self, call)

    monkeypatch.setattr(Router, "route", broken_route)
    with trio.fail_after(30):
        async with daemon_and_agents(tmp_path, True) as (daemon, agent, bystander):
            body = modern(1, "tools/call", {"name": BROKEN, "arguments": {"text": "x"}})
            reply = await post(daemon.socket_path, body, *modern_headers("tools/call", BROKEN))
            assert reply.status == 200
            assert_internal_error(reply.json(), "TypeError")
            name = "mcp__s__tool0"
            body = modern(2, "tools/call", {"name": name, "arguments": {"text": "x"}})
            reply = await post(daemon.socket_path, body, *modern_headers("tools/call", name))
            assert text(reply.json()["result"]) == "tool0:x"
            await served_on(daemon, agent, bystander)
            await daemon.audit.flush()
    [logged] = failures(caplog)
    assert logged.exc_info is not None and logged.exc_info[0] is TypeError
    records = [r for r in AuditRecords(str(tmp_path / "state")) if r.name == BROKEN]
    assert [(r.outcome, r.reason) for r in records] == [("error", "mcpd failed: TypeError")]


async def test_an_agent_that_makes_mcpd_fail_again_and_again_does_not_flood_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request is answered; the tracebacks are let through a throttle."""
    caplog.set_level(logging.ERROR, logger="mcpd.agents")

    def broken_route(self: Router, call: Any, agent: Any) -> Any:
        raise TypeError(SECRET)

    with trio.fail_after(30):
        async with daemon_and_agents(tmp_path, True) as (daemon, agent, bystander):
            monkeypatch.setattr(Router, "route", broken_route)
            sent = 40
            lines = [
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": f"n{i}",
                        "method": "tools/call",
                        "params": {"name": BROKEN, "arguments": {}, "_meta": META},
                    }
                )
                for i in range(sent)
            ]
            await agent.send_raw(("\n".join(lines) + "\n").encode())
            replies = await agent.wait_unmatched(sent)
            assert {r["error"]["code"] for r in replies} == {rpc.INTERNAL_ERROR}
            assert sorted(r["id"] for r in replies) == sorted(f"n{i}" for i in range(sent))
            agent.unmatched.clear()
            monkeypatch.undo()
            await served_on(daemon, agent, bystander)
    assert 1 <= len(failures(caplog)) <= sent // 4


async def test_only_exceptions_are_answered_and_the_rest_goes_on_up() -> None:
    """What a request's task ended with: a cancellation, alone or gathered, and
    KeyboardInterrupt are raised again; an exception gathered with a cancellation is
    answered, and the cancellation still goes up; a request the agent cancelled gets
    no answer."""
    answered: list[bytes] = []
    guard = Failures()
    one = await cancelled()

    def ended(exc: BaseException, scope: trio.CancelScope | None = None) -> None:
        guard.of_task("agent", 7, "prompts/get", exc, scope or trio.CancelScope(), answered.append)

    for passing in (one, BaseExceptionGroup("", [one, await cancelled()]), KeyboardInterrupt()):
        with pytest.raises(type(passing)) as raised:
            ended(passing)
        assert raised.value is passing
    assert answered == []
    with pytest.raises(BaseExceptionGroup) as rest:
        ended(BaseExceptionGroup("", [one, TypeError(SECRET)]))
    assert rest.value.exceptions == (one,)
    [line] = answered
    assert_internal_error(json.loads(line), "TypeError")
    assert json.loads(line)["id"] == 7
    gone = trio.CancelScope()
    gone.cancel()
    ended(TypeError(SECRET), gone)
    assert len(answered) == 1
