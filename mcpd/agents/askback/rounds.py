"""The rounds of one agent request whose server may ask back: what a round is
(``RoundTrip``), and the rounds mcpd runs for a legacy agent whose server is modern.

A modern server answers ``input_required`` and expects the request again with the
answers and its ``requestState``; a legacy agent takes no ``input_required``, so mcpd
asks it each input request as a request of its own and sends the request again
itself (``legacy_rounds``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features

from ...servers.shared import NO_ANSWER, Asker, Outcome
from .askers import MAX_ROUNDS, DirectAsker

# The request as its server is sent it: a tools/call's ``Call``, or the params of a
# prompts/get or resources/read.
Req = TypeVar("Req")
# What it comes to at its server: a call's ``Outcome``, or the part of one that a
# prompts/get or resources/read may come to.
Out = TypeVar("Out", bound=Outcome)

# (the request, who answers what its server asks) -> what the server came to
SendRound = Callable[[Req, Asker | None], Awaitable[Out]]
# (the request, the agent's answers (UNSET when nothing was asked), requestState)
# -> the request to send again
Resend = Callable[[Req, Raw | UnsetType, Raw | UnsetType], Req]
# (the reply's id, what the request came to, or mcpd's error ending its rounds) -> the
# agent's reply line
ShapeReply = Callable[[rpc.Id, Out | rpc.RPCError], bytes]
# What an outcome is read for here: its ``resultType`` and what it asks.
Head = features.ResultHead | mcp.CallToolResultFate
# The head of what the request last came to, as read already (a tools/call's
# ``Call.head``), or None: not read yet, so read here.
ReadHead = Callable[[Req], Head | None]


def _not_read(request: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class RoundTrip(Generic[Req, Out]):
    """How one kind of request goes to its server and back, round after round."""

    send: SendRound[Req, Out]
    shape: ShapeReply[Out]
    resend: Resend[Req]
    read: ReadHead[Req] = _not_read


_heads: Final = msgspec.json.Decoder(features.ResultHead)
_encode: Final = msgspec.json.Encoder().encode


def _input_required(outcome: Outcome, read: Head | None) -> Head | None:
    """The head of ``outcome`` when it is a server's input_required, else None.
    ``read``: that head as read already, which is not read again."""
    if not isinstance(outcome, Raw):
        return None
    head: Head
    if read is not None:
        head = read
    else:
        try:
            head = _heads.decode(outcome)
        except (msgspec.DecodeError, RecursionError):
            return None
    return head if head.resultType == mcp.INPUT_REQUIRED else None


def shedding(outcome: Outcome, read: Head | None = None) -> Head | None:
    """The head of ``outcome`` when it is an input_required that asks nothing, only to
    be called again with its requestState (``features.asks_nothing``): what a legacy
    agent never sees, as mcpd calls again for it (``legacy_rounds``, which takes that
    head as read). None for any other. ``read``: its head as read already
    (``Call.head``), which is not read again."""
    head = _input_required(outcome, read)
    if head is None or not features.asks_nothing(head.inputRequests, head.requestState):
        return None
    return head


async def _answers(
    requests: dict[str, Any], asker: DirectAsker, ask_timeout: float
) -> Raw | rpc.RPCError:
    """The agent's answers to each of ``requests``, or why it gave none: each waits
    ``ask_timeout`` at most, as a legacy server's request to the agent does."""
    answers: dict[str, Raw] = {}
    for key, request in requests.items():
        method = request["method"]
        try:
            with trio.fail_after(ask_timeout):
                answers[key] = await asker.ask(method, request.get("params"))
        except trio.TooSlowError:
            why = f"the agent did not answer {method} within {ask_timeout:g} s (ask_timeout)"
            return rpc.RPCError(NO_ANSWER, why)
        except rpc.RPCError as exc:
            # The call's error is mcpd's: the agent's own code would read as the call's
            # (-32601 would say tools/call is no method).
            why = f"the agent could not answer {method}: {exc.message} (error {exc.code})"
            return rpc.RPCError(NO_ANSWER, why)
    return Raw(_encode(answers))


async def legacy_rounds(
    request: Req, asker: DirectAsker | None, trip: RoundTrip[Req, Out], *, ask_timeout: float
) -> Out | rpc.RPCError:
    """Send ``request``; while the server answers input_required, ask the agent what it
    can answer (``ask_timeout`` at most each) and send it again with the answers and
    the same requestState; one that asks nothing is sent again at once. After
    ``MAX_ROUNDS`` it ends, whatever the server still asks."""
    outcome = await trip.send(request, asker)
    for _ in range(MAX_ROUNDS):
        head = _input_required(outcome, trip.read(request))
        if head is None:
            return outcome
        requests = head.inputRequests
        answers: Raw | UnsetType = UNSET
        if not features.asks_nothing(requests, head.requestState):
            # Only what asks the agent something it declared is answered here; the rest
            # is the agent's to be told of (``results``, ``prompts``).
            if (
                asker is None
                or not isinstance(requests, dict)
                or not requests
                or not features.answerable(requests, asker.capabilities)
            ):
                return outcome
            got = await _answers(requests, asker, ask_timeout)
            if isinstance(got, rpc.RPCError):
                return got
            answers = got
        request = trip.resend(request, answers, head.requestState)
        outcome = await trip.send(request, asker)
    if _input_required(outcome, trip.read(request)) is None:
        return outcome
    return rpc.RPCError(
        rpc.INTERNAL_ERROR,
        f"the server kept asking for input past mcpd's limit of {MAX_ROUNDS} rounds for "
        "one request, so it did not complete; the same request would most likely end "
        "the same way",
    )
