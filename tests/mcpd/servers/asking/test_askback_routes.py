"""What a server asks mcpd when no single agent's request is behind it, or when one
agent's is that is already being asked something."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.tables.model import Config
from mcpd.servers.asking import ended_asks
from mcpd.servers.asking.askback import AskRoutes
from mcpd.servers.asking.ended_asks import End
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META, make_config, running
from tests.support.clients.answering import AnsweringAgent, connect_answering
from transports.errors import TransportError


class Agent:
    direct = True

    def __init__(self, answer: object = None) -> None:
        self.owner = object()
        self.answer = answer  # None: it should never be asked

    async def ask(self, method: str, params: Any) -> Any:
        if self.answer is None:
            raise AssertionError("nobody should be asked")
        return self.answer


async def refused(routes: AskRoutes) -> str:
    with pytest.raises(rpc.RPCError) as caught:
        await routes.answer(rpc.Request(7, "roots/list", None))
    return caught.value.message


async def test_a_server_asking_with_nobody_to_ask_is_refused_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpd.askback")
    routes = AskRoutes("files", lambda: 5.0)
    # Many servers ask for roots as they start: refused, logged below INFO.
    assert "no agent has a request in flight" in await refused(routes)
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG and "refused its roots/list" in record.getMessage()
    # Two agents' requests at once: mcpd cannot tell whose it is, and says so at INFO.
    caplog.clear()
    routes.enter(Agent())
    routes.enter(Agent())
    assert "several agents" in await refused(routes)
    (record,) = caplog.records
    assert record.levelno == logging.INFO


async def test_a_server_that_answers_out_of_order_is_not_taken_to_be_done_with_an_ended_call() -> (
    None
):
    routes = AskRoutes("files", lambda: 5.0)
    gone, still = Agent(), Agent()
    routes.leave(routes.enter(gone), End.UNANSWERED)
    long = routes.enter(still)
    # Answered while the one sent before it is open.
    routes.leave(routes.enter(still), End.ANSWERED)
    # That answer came after the cancel, but work begun before it may still ask.
    assert "ended too lately to rule out" in await refused(routes)
    routes.leave(long, End.ANSWERED)


async def test_a_request_whose_connection_failed_is_no_sign_the_server_read_past_an_ended_one() -> (
    None
):
    routes = AskRoutes("files", lambda: 5.0)
    gone, other = Agent(), Agent()
    with trio.CancelScope() as given_up:
        given_up.cancel()
        with routes.scope(gone, None, 0.0):
            await trio.sleep_forever()
    with pytest.raises(TransportError), routes.scope(other, None, 0.0):
        raise TransportError("connection reset")  # no answer of the server's
    routes.enter(other)
    assert "ended too lately to rule out" in await refused(routes)


async def test_a_servers_error_is_its_answer() -> None:
    routes = AskRoutes("files", lambda: 5.0)
    gone, other = Agent(), Agent({"roots": []})
    with trio.CancelScope() as given_up:
        given_up.cancel()
        with routes.scope(gone, None, 0.0):
            await trio.sleep_forever()
    with pytest.raises(rpc.RPCError), routes.scope(other, None, 0.0):
        raise rpc.RPCError(rpc.INVALID_PARAMS, "no such file")  # sent after the cancel
    routes.enter(other)
    assert await routes.answer(rpc.Request(7, "roots/list", None)) == {"roots": []}


# -- through the daemon: a server that asks about a call again while its question is open

TWO = "mcp__two__"
ASKER = str(Path(__file__).parents[3] / "support" / "asking" / "overlapping_asker.py")
CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
ACCEPTED = {"action": "accept", "content": {}}
ROOTS = {"roots": [{"uri": "file:///work/mine", "name": "mine"}]}


def answering_as(who: str) -> Callable[[str, Any], Any]:
    """What an agent answers; its sample says whose model wrote it."""

    def answer(method: str, params: Any) -> Any:
        if method == "sampling/createMessage":
            text = {"type": "text", "text": f"sampled by {who}"}
            return {"role": "assistant", "content": text, "model": "m"}
        return ROOTS if method == "roots/list" else ACCEPTED

    return answer


def overlapping_config(tmp_path: Path) -> Config:
    server = {"command": sys.executable, "args": [ASKER], "era": "legacy"}
    # Long enough that nothing here ends by running out of time.
    return make_config(tmp_path, {"two": server}, ask_timeout=3600.0, call_timeout=3600.0)


async def victims_call(victim: AnsweringAgent, other: AnsweringAgent) -> dict[str, Any]:
    """The victim calls ask_twice as a legacy agent; while its question is open the
    other agent's call starts, and the server asks about the victim's call again."""
    await victim.initialize_with(CAPS)
    victim.hold = True  # the user takes their time
    got: dict[str, Any] = {}

    async def call() -> None:
        got.update(await victim.call(TWO + "ask_twice", {"after_hold": True}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        [question] = await victim.wait_asked(1)
        assert question["method"] == "elicitation/create"
        await other.call(TWO + "hold")  # answered once the second request came back
        victim.answer_held(question)
    return got


async def modern_victims_call(victim: AnsweringAgent, other: AnsweringAgent) -> dict[str, Any]:
    """As ``victims_call``, the victim a 2026-07-28 agent whose question came back as
    its call's input_required."""
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": CAPS}
    params: dict[str, Any] = {"name": TWO + "ask_twice", "arguments": {"after_hold": True}}
    first = await victim.result("tools/call", {**params, "_meta": meta})
    assert first["resultType"] == "input_required"
    ((key, question),) = first["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    await other.call(TWO + "hold")
    retry = {"inputResponses": {key: ACCEPTED}, "requestState": first["requestState"]}
    return await victim.result("tools/call", {**params, **retry, "_meta": meta})  # type: ignore[no-any-return]


@pytest.mark.parametrize("modern", [False, True], ids=["legacy-victim", "modern-victim"])
async def test_a_request_about_a_call_whose_agent_is_being_asked_reaches_no_other_agent(
    tmp_path: Path, modern: bool
) -> None:
    with trio.fail_after(60):
        async with (
            running(overlapping_config(tmp_path)) as daemon,
            connect_answering(daemon.socket_path, modern, answering_as("victim")) as victim,
            connect_answering(daemon.socket_path, False, answering_as("other")) as other,
        ):
            await other.initialize_with(CAPS)
            if modern:
                result = await modern_victims_call(victim, other)
            else:
                result = await victims_call(victim, other)
    # The other agent never saw the victim's prompt, nor could it answer for the victim.
    assert other.asked == []
    came_back = json.loads(result["content"][0]["text"])
    assert came_back["form"] == ACCEPTED
    assert "cannot tell which agent" in came_back["second"]["message"]


async def test_a_server_may_ask_for_roots_while_its_question_to_the_agent_is_open(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with (
            running(overlapping_config(tmp_path)) as daemon,
            connect_answering(daemon.socket_path, False, answering_as("agent")) as agent,
        ):
            await agent.initialize_with(CAPS)
            agent.hold = True
            got: dict[str, Any] = {}

            async def call() -> None:
                got.update(await agent.call(TWO + "ask_twice", {"second": "roots"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                # Both requests reach the agent while neither is answered.
                asked = await agent.wait_asked(2)
                assert sorted(m["method"] for m in asked) == ["elicitation/create", "roots/list"]
                for request in asked:
                    agent.answer_held(request)
    came_back = json.loads(got["content"][0]["text"])
    assert came_back == {"form": ACCEPTED, "second": ROOTS}


# -- through the daemon: a server that asks about a call after it ended


async def late_callers_call(
    daemon_socket: str, after_report: bool, hang_up: bool, after_quick: int = 0
) -> None:
    """An agent calls ask_after_cancel and, once the server is at work on it, cancels
    the call or hangs up; the server asks about it only once it has read the cancel
    (and answered ``after_quick`` quick calls)."""
    async with connect_answering(daemon_socket, False, answering_as("late")) as late:
        await late.initialize_with(CAPS)
        arguments = {"topic": "B-PRIVATE", "after_report": after_report}
        arguments["after_quick"] = after_quick
        params = {"name": TWO + "ask_after_cancel", "arguments": arguments}
        params["_meta"] = {"progressToken": "p"}
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        await late.send_raw(json.dumps(body).encode() + b"\n")
        await late.wait_notifications(1)  # the server has the call
        if not hang_up:
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
            cancel["params"] = {"requestId": 7}
            await late.send_raw(json.dumps(cancel).encode() + b"\n")
            # Held open until the other agent's call is over: only the cancel ended it.
            await trio.sleep_forever()


@pytest.mark.parametrize("hang_up", [False, True], ids=["cancelled", "hung-up"])
async def test_a_request_about_a_call_that_ended_reaches_no_other_agent(
    tmp_path: Path, hang_up: bool
) -> None:
    with trio.fail_after(60):
        async with (
            running(overlapping_config(tmp_path)) as daemon,
            connect_answering(daemon.socket_path, False, answering_as("other")) as other,
        ):
            await other.initialize_with(CAPS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(late_callers_call, daemon.socket_path, True, hang_up)
                # In flight when the server asks about the ended call.
                result = await other.call(TWO + "report")
                nursery.cancel_scope.cancel()
    assert other.asked == []
    came_back = json.loads(result["content"][0]["text"])
    assert "cannot tell which agent" in came_back["message"]


async def test_a_concurrent_server_asking_late_about_an_ended_call_reaches_no_other_agent(
    tmp_path: Path,
) -> None:
    """The server answers a call sent after the cancel, so it has read it; but it has
    answered a call while one sent earlier was open, so it works on calls at once, and
    the work begun for the ended call may still ask about it."""
    with trio.fail_after(60):
        async with (
            running(overlapping_config(tmp_path)) as daemon,
            connect_answering(daemon.socket_path, False, answering_as("other")) as other,
        ):
            await other.initialize_with(CAPS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(late_callers_call, daemon.socket_path, False, False, 2)
                await other.call(TWO + "quick")  # answered once the server read the cancel
                got: dict[str, Any] = {}
                reported = trio.Event()

                async def report() -> None:
                    params = {"name": TWO + "report", "_meta": {"progressToken": "r"}}
                    got.update(await other.result("tools/call", params))
                    reported.set()

                nursery.start_soon(report)
                await other.wait_notifications(1)  # the server has the report call
                await other.call(TWO + "quick")  # answered while that call is open
                await reported.wait()
                nursery.cancel_scope.cancel()
    assert other.asked == []
    came_back = json.loads(got["content"][0]["text"])
    assert "ended too lately to rule out" in came_back["message"]


async def test_once_an_ended_call_is_past_its_grace_an_agents_call_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grace = 0.2
    monkeypatch.setattr(ended_asks, "GRACE", grace)
    with trio.fail_after(60):
        async with (
            running(overlapping_config(tmp_path)) as daemon,
            connect_answering(daemon.socket_path, False, answering_as("agent")) as agent,
        ):
            await agent.initialize_with(CAPS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(late_callers_call, daemon.socket_path, False, False)
                # The question about the cancelled call is asked of nobody.
                late = json.loads((await agent.call(TWO + "report"))["content"][0]["text"])
                assert "cannot tell which agent" in late["message"]
                await trio.sleep(grace)
                result = await agent.call(TWO + "ask_once")
                nursery.cancel_scope.cancel()
    [question] = agent.asked
    assert question["params"]["message"].endswith("Go on?")
    assert json.loads(result["content"][0]["text"]) == ACCEPTED


class OnTrial(logging.Handler):
    """Sets ``said`` once the journal says a server's circuit closed on trial (mcpd's
    probe was answered: calls go again)."""

    def __init__(self) -> None:
        super().__init__()
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == "breaker_trial":
            self.said.set()


async def test_a_call_the_open_circuit_refused_is_no_sign_the_server_read_past_an_ended_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One agent's call runs out of time while the server is still at work on it, and
    the circuit opens (as an outage opens it); the other agent's next call is refused by
    the circuit, never sent; its call after that is in flight when the server asks about
    the first."""
    server = {
        "command": sys.executable,
        "args": [ASKER],
        "era": "legacy",
        "tool_timeouts": {"ask_after_cancel": 0.5},
    }
    config = make_config(
        tmp_path,
        {"two": server},
        ask_timeout=3600.0,
        call_timeout=3600.0,
        failure_threshold=1,
        cooldown_base=3.0,  # while the other agent's call comes and is refused
    )
    caplog.set_level(logging.INFO, logger="mcpd.server")
    journal = OnTrial()
    logging.getLogger("mcpd.server").addHandler(journal)
    try:
        with trio.fail_after(60):
            async with (
                running(config) as daemon,
                connect_answering(daemon.socket_path, False, answering_as("late")) as late,
                connect_answering(daemon.socket_path, False, answering_as("other")) as other,
            ):
                await late.initialize_with(CAPS)
                await other.initialize_with(CAPS)
                arguments = {"topic": "B-PRIVATE", "after_report": True}
                timed_out = await late.call(TWO + "ask_after_cancel", arguments)
                assert "did not answer this call in time" in timed_out["content"][0]["text"]
                # A slow call opens no circuit at a server that answers: a failure does.
                runner = daemon.supervisor.servers["two"]
                ticket = runner.breaker.allow(trio.current_time()).ticket
                runner.standing.availability_failure(0.0, "connection reset", ticket)
                refused = await other.call(TWO + "quick")
                assert "unavailable (open)" in refused["content"][0]["text"]
                await journal.said.wait()  # mcpd's own probe found the server answering
                result = await other.call(TWO + "report")
    finally:
        logging.getLogger("mcpd.server").removeHandler(journal)
    assert other.asked == [] and late.asked == []
    came_back = json.loads(result["content"][0]["text"])
    assert "ended too lately to rule out" in came_back["message"]


# -- through the daemon: a 2026-07-28 server that sends a request of its own mid-call

HOSTILE_ASKER = str(Path(__file__).parents[3] / "support" / "hostile" / "asker.py")


async def test_a_modern_servers_own_request_during_a_call_is_refused_for_what_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcpd.askback")
    server = {"command": sys.executable, "args": [HOSTILE_ASKER, "--asks", "1"], "era": "modern"}
    config = make_config(tmp_path, {"bad": server})
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": CAPS}
    with trio.fail_after(60):
        async with (
            running(config) as daemon,
            connect_answering(daemon.socket_path, True, answering_as("agent")) as agent,
        ):
            call = {"name": "mcp__bad__ask_flood", "arguments": {"text": "1"}, "_meta": meta}
            result = await agent.result("tools/call", call)
    assert agent.asked == []
    came_back = json.loads(result["content"][0]["text"])
    assert came_back["codes"] == {str(rpc.METHOD_NOT_FOUND): 1}
    said = came_back["said"]
    assert "speaks 2026-07-28, whose servers ask their client in an input_required result" in said
    assert "in flight" not in said
    [line] = [r.getMessage() for r in caplog.records if "refused its" in r.getMessage()]
    assert line.startswith("bad: refused its elicitation/create request: it speaks 2026-07-28")
