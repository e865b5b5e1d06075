"""The rounds mcpd runs for a legacy agent whose server is modern (``legacy_rounds``),
over a server played by a function: the agent is asked what the server needs, the
request goes again as the trip resends it (the same kind of request, with the answers
and the server's state), and one that asks nothing is sent again without asking."""

from __future__ import annotations

from typing import Any

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from mcpd.agents.askback.askers import AgentRequests, DirectAsker
from mcpd.agents.askback.rounds import RoundTrip, legacy_rounds, shedding
from mcpd.servers.asking.askback import Asker
from mcpd.servers.calling.calls import Outcome
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

FORM = {"mode": "form", "message": "which branch?", "requestedSchema": {"type": "object"}}


class Sent(msgspec.Struct):
    """A request as its server is sent it, with what a round adds to it."""

    name: str
    answers: Raw | UnsetType = UNSET
    state: Raw | UnsetType = UNSET


def encode(value: Any) -> Raw:
    return Raw(msgspec.json.encode(value))


def input_required(state: str, asks: dict[str, Any] | None = None) -> Raw:
    head: dict[str, Any] = {"resultType": mcp.INPUT_REQUIRED, "requestState": state}
    if asks is not None:
        head["inputRequests"] = asks
    return encode(head)


class Server:
    """Asks for a form first, then answers with what it got; each request is kept."""

    def __init__(self, first: Raw) -> None:
        self.first = first
        self.got: list[Sent] = []

    async def send(self, request: Sent, asker: Asker | None) -> Outcome:
        self.got.append(request)
        if len(self.got) == 1:
            return self.first
        return encode({"answers": msgspec.json.decode(request.answers or b"null")})


def resend(request: Sent, answers: Raw | UnsetType, state: Raw | UnsetType) -> Sent:
    return Sent(request.name, answers, state)


def shape(rid: rpc.Id, outcome: Outcome) -> bytes:
    raise AssertionError("legacy_rounds hands its outcome back unshaped")


def agent(answer: Any) -> tuple[DirectAsker, list[bytes]]:
    """A legacy agent that answers each request mcpd sends it with ``answer``."""
    requests = AgentRequests()
    lines: list[bytes] = []

    def send(line: bytes) -> bool:
        lines.append(line)
        asked = msgspec.json.decode(line)
        requests.route(rpc.Response(asked["id"], encode(answer)))
        return True

    return DirectAsker(object(), {"elicitation": {}}, requests, send), lines


async def test_the_agent_is_asked_and_the_request_goes_again_with_its_answer() -> None:
    server = Server(
        input_required("s1", {"branch": {"method": "elicitation/create", "params": FORM}})
    )
    asker, lines = agent({"action": "accept", "content": {"b": "main"}})
    trip = RoundTrip(send=server.send, shape=shape, resend=resend)
    with trio.fail_after(5):
        outcome = await legacy_rounds(Sent("t"), asker, trip, ask_timeout=5)
    assert [msgspec.json.decode(line)["method"] for line in lines] == ["elicitation/create"]
    assert [s.name for s in server.got] == ["t", "t"]
    again = server.got[1]
    assert again.state == encode("s1")
    assert msgspec.json.decode(again.answers or b"null") == {
        "branch": {"action": "accept", "content": {"b": "main"}}
    }
    assert isinstance(outcome, Raw)
    assert msgspec.json.decode(outcome)["answers"]["branch"]["action"] == "accept"


async def test_one_that_asks_nothing_is_sent_again_without_asking_the_agent() -> None:
    shed = input_required("later")
    assert shedding(shed) is not None
    server = Server(shed)
    asker, lines = agent({})
    trip = RoundTrip(send=server.send, shape=shape, resend=resend)
    with trio.fail_after(5):
        outcome = await legacy_rounds(Sent("t"), asker, trip, ask_timeout=5)
    assert lines == []
    assert server.got[1].state == encode("later") and server.got[1].answers is UNSET
    assert shedding(outcome) is None


async def test_what_the_agent_did_not_declare_goes_back_as_the_server_said_it() -> None:
    asks = {"model": {"method": "sampling/createMessage", "params": {"messages": []}}}
    server = Server(input_required("s1", asks))
    asker, lines = agent({})
    trip = RoundTrip(send=server.send, shape=shape, resend=resend)
    with trio.fail_after(5):
        outcome = await legacy_rounds(Sent("t"), asker, trip, ask_timeout=5)
    assert lines == [] and len(server.got) == 1
    assert outcome == server.first
