"""One agent request whose server may ask back, driven by ``AskBackDriver`` over a
server played by a function: what each kind of agent is said to be able to answer, a
modern agent's input_required of mcpd's making and its retries (another agent's retry
and an expired one refused), a server that faults or an agent that gives up or leaves,
and each agent of the other kinds served without a task of the driver's."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import UNSET, Raw, UnsetType

from mcpd.agents.askback.askers import TOKEN_PREFIX, DirectAsker, ParkedAsker
from mcpd.agents.askback.driver import AgentSide, AskBackDriver, Asked, may_be_asked
from mcpd.agents.askback.rounds import RoundTrip
from mcpd.servers.asking.askback import NO_ANSWER
from mcpd.servers.shared import AgentKey
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

ASKS = {"elicitation": {}}
FORM = {"mode": "form", "message": "which branch?", "requestedSchema": {"type": "object"}}


def side(owner: AgentKey, modern: bool = True, caps: dict[str, Any] | None = None) -> AgentSide:
    sent: list[bytes] = []
    return AgentSide(owner, modern, ASKS if caps is None else caps, None, sent.append)


def shape(rid: rpc.Id, outcome: Any) -> bytes:
    if isinstance(outcome, rpc.RPCError):
        return rpc.encode_error(rid, outcome.code, outcome.message)
    return rpc.encode_result(rid, outcome)


def no_retry(params: Any, responses: Raw | UnsetType, state: Raw | UnsetType) -> Any:
    raise AssertionError("no modern server here")


def decoded(reply: bytes) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.decode(reply)
    return out


def raw(value: Any) -> Raw:
    return Raw(msgspec.json.encode(value))


class AskingServer:
    """A legacy server's call: it asks its agent for a form, then answers with what it
    was given; each asker it was handed is kept."""

    def __init__(self) -> None:
        self.askers: list[Any] = []
        self.cancelled = trio.Event()

    async def __call__(self, params: Any, asker: Any) -> Any:
        self.askers.append(asker)
        try:
            answer = await asker.ask("elicitation/create", FORM)
        except trio.Cancelled:
            self.cancelled.set()
            raise
        except rpc.RPCError as exc:
            return rpc.RPCError(exc.code, exc.message)
        return {"got": msgspec.json.decode(answer)}


@asynccontextmanager
async def running() -> AsyncIterator[AskBackDriver]:
    driver = AskBackDriver()
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        yield driver
        nursery.cancel_scope.cancel()


async def serve(
    driver: AskBackDriver,
    agent: AgentSide,
    server: Any,
    rid: rpc.Id = 1,
    state: Any = UNSET,
    responses: Any = UNSET,
    name: str = "mcp__s__tool",
    arguments: Raw | UnsetType = UNSET,
) -> dict[str, Any]:
    with trio.fail_after(5):
        asked = Asked({}, rid, "tools/call", name, arguments, state, responses)
        reply = await driver.serve(
            agent, asked, RoundTrip(send=server, shape=shape, resend=no_retry)
        )
    return decoded(reply)


# -- what an agent can be asked --


@pytest.mark.parametrize(
    ("caps", "asks"),
    [
        (None, False),
        ({}, False),
        ({"elicitation": {}}, True),
        ({"sampling": {"tools": {}}}, True),
        ({"roots": {}}, True),
        ({"elicitation": True}, False),
        ({"elicitation": None, "experimental": {}}, False),
        ({"extensions": {"io.modelcontextprotocol/tasks": {}}}, False),
    ],
)
def test_an_agent_may_be_asked_only_what_it_declared_as_an_object(
    caps: dict[str, Any] | None, asks: bool
) -> None:
    assert may_be_asked(caps) is asks
    assert side(AgentKey(), caps=caps or {}).asks is asks


def test_a_modern_agents_capabilities_pass_on_as_they_came() -> None:
    caps = {"elicitation": {"url": {}}, "extensions": {"x": {}}}
    assert side(AgentKey(), True, caps).upstream_capabilities() == caps
    assert side(AgentKey(), True, {}).upstream_capabilities() is None


def test_a_legacy_agents_capabilities_are_told_in_the_2026_shape() -> None:
    caps = {
        "elicitation": {"form": {}},
        "sampling": {},
        "roots": {"listChanged": True},
        "experimental": {"x": {}},
    }
    told = side(AgentKey(), False, caps).upstream_capabilities()
    assert told == {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
    malformed = {"elicitation": True, "sampling": "yes", "roots": []}
    assert side(AgentKey(), False, malformed).upstream_capabilities() is None


# -- a modern agent asked through input_required --


async def test_a_servers_question_ends_the_request_and_the_retry_brings_the_answer() -> None:
    agent = side(AgentKey())
    server = AskingServer()
    async with running() as driver:
        first = await serve(driver, agent, server, rid="a")
        assert first["id"] == "a"
        result = first["result"]
        assert result["resultType"] == mcp.INPUT_REQUIRED
        [(key, asked)] = result["inputRequests"].items()
        assert asked == {"method": "elicitation/create", "params": FORM}
        token = result["requestState"]
        assert token.startswith(TOKEN_PREFIX)
        answer = {key: {"action": "accept", "content": {"branch": "main"}}}
        second = await serve(driver, agent, server, "b", raw(token), raw(answer))
    assert second == {
        "jsonrpc": "2.0",
        "id": "b",
        "result": {"got": {"action": "accept", "content": {"branch": "main"}}},
    }
    [asker] = server.askers
    assert isinstance(asker, ParkedAsker)


@pytest.mark.parametrize("responses", [UNSET, raw({}), raw({"other": {}}), Raw(b"{not json")])
async def test_a_retry_without_the_answer_is_asked_again(responses: Any) -> None:
    agent = side(AgentKey())
    async with running() as driver:
        first = (await serve(driver, agent, AskingServer(), rid=1))["result"]
        again = await serve(driver, agent, AskingServer(), 2, raw(first["requestState"]), responses)
    assert again["id"] == 2
    assert again["result"]["inputRequests"] == first["inputRequests"]
    assert again["result"]["requestState"] == first["requestState"]


async def test_another_agents_retry_is_refused_and_the_question_still_waits() -> None:
    owner = AgentKey()
    server = AskingServer()
    async with running() as driver:
        first = (await serve(driver, side(owner), server))["result"]
        token, [key] = raw(first["requestState"]), list(first["inputRequests"])
        stolen = raw({key: {"action": "decline"}})
        with pytest.raises(rpc.RPCError, match="another agent"):
            await serve(driver, side(AgentKey()), server, 2, token, stolen)
        with pytest.raises(rpc.RPCError, match="continues a tools/call of 'mcp__s__tool'"):
            await serve(driver, side(owner), server, 3, token, stolen, name="mcp__s__other")
        other = Raw(b'{"v": 2}')
        with pytest.raises(rpc.RPCError, match="continues a call with other arguments "):
            await serve(driver, side(owner), server, 3, token, stolen, arguments=other)
        done = await serve(driver, side(owner), server, 4, token, raw({key: {"action": "cancel"}}))
    assert done["result"] == {"got": {"action": "cancel"}}


@pytest.mark.parametrize("state", [f"{TOKEN_PREFIX}made-up", f"{TOKEN_PREFIX}"])
async def test_an_mcpd_request_state_that_names_no_question_is_said_to_have_expired(
    state: str,
) -> None:
    async with running() as driver:
        with pytest.raises(rpc.RPCError) as refused:
            await serve(driver, side(AgentKey()), AskingServer(), state=raw(state))
    assert refused.value.code == rpc.INVALID_PARAMS and "expired" in refused.value.message


@pytest.mark.parametrize("state", [raw("the-servers-own"), raw({"k": 1}), Raw(b"{broken")])
async def test_a_request_state_of_the_servers_own_goes_on_to_the_server(state: Raw) -> None:
    seen: list[Any] = []

    async def server(params: Any, asker: Any) -> Any:
        seen.append(params)
        return {"ok": True}

    async with running() as driver:
        reply = await serve(driver, side(AgentKey()), server, state=state)
    assert reply["result"] == {"ok": True} and seen == [{}]


async def test_a_server_side_fault_costs_that_request_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)

    async def broken(params: Any, asker: Any) -> Any:
        raise KeyError("secret-of-the-server")

    async with running() as driver:
        reply = await serve(driver, side(AgentKey()), broken, rid=9)
        assert reply["id"] == 9 and reply["error"]["code"] == rpc.INTERNAL_ERROR
        assert "KeyError" in reply["error"]["message"]
        assert "secret-of-the-server" not in reply["error"]["message"]
        # The driver serves on.
        later = await serve(driver, side(AgentKey()), AskingServer(), rid=10)
        assert later["result"]["resultType"] == mcp.INPUT_REQUIRED


async def test_an_agent_that_stops_waiting_stops_its_servers_request() -> None:
    started, stopped = trio.Event(), trio.Event()

    async def slow(params: Any, asker: Any) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async with running() as driver:
        with trio.CancelScope() as agents_request:

            async def give_up() -> None:
                await started.wait()
                agents_request.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(give_up)
                await serve(driver, side(AgentKey()), slow)
        # The server's request ran in the driver's own task; it is stopped too.
        with trio.fail_after(5):
            await stopped.wait()


async def test_an_agent_that_leaves_has_its_questions_fail_at_once() -> None:
    owner = AgentKey()
    outcomes: list[Any] = []

    async def server(params: Any, asker: Any) -> Any:
        try:
            await asker.ask("elicitation/create", FORM)
        except rpc.RPCError as exc:
            outcomes.append(exc)
            raise
        return {}

    async with running() as driver:
        first = (await serve(driver, side(owner), server))["result"]
        assert first["resultType"] == mcp.INPUT_REQUIRED
        driver.owner_gone(owner, "the agent disconnected")
        with trio.fail_after(5):
            await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(rpc.RPCError, match="expired"):
            await serve(driver, side(owner), server, 2, raw(first["requestState"]), raw({}))
    [failed] = outcomes
    assert failed.code == NO_ANSWER and failed.message == "the agent disconnected"


async def test_a_question_the_agent_did_not_declare_is_refused_to_the_server() -> None:
    server = AskingServer()

    async def sampling(params: Any, asker: Any) -> Any:
        try:
            await asker.ask("sampling/createMessage", {"messages": []})
        except rpc.RPCError as exc:
            return {"refused": exc.message}
        return {}

    async with running() as driver:
        reply = await serve(driver, side(AgentKey()), sampling)
    assert "did not declare the sampling capability" in reply["result"]["refused"]
    assert server.askers == []


# -- the other agents: no task of the driver's --


async def test_a_modern_agent_that_declared_nothing_is_refused_to_its_server_directly() -> None:
    server = AskingServer()
    async with running() as driver:
        reply = await serve(driver, side(AgentKey(), caps={}), server)
    assert reply["error"]["code"] == rpc.METHOD_NOT_FOUND
    assert "did not declare the elicitation" in reply["error"]["message"]
    [asker] = server.askers
    assert isinstance(asker, DirectAsker) and asker.capabilities is None


async def test_a_legacy_agent_is_asked_with_a_request_of_mcpds_own() -> None:
    sent: list[bytes] = []

    def send(line: bytes) -> bool:
        sent.append(line)
        return True

    agent = AgentSide(AgentKey(), False, ASKS, None, send)
    server = AskingServer()
    async with running() as driver, trio.open_nursery() as nursery:

        async def call() -> None:
            outcomes.append(await serve(driver, agent, server, rid=5))

        outcomes: list[dict[str, Any]] = []
        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        [line] = sent
        asked = decoded(line)
        assert asked["method"] == "elicitation/create" and asked["params"] == FORM
        [asker] = server.askers
        assert isinstance(asker, DirectAsker)
        asker._requests.route(rpc.Response(asked["id"], raw({"action": "decline"})))
    assert outcomes == [{"jsonrpc": "2.0", "id": 5, "result": {"got": {"action": "decline"}}}]
