"""Servers that ask back, seen from the agents' side, in both eras and across them.

A server asks for input in one of two ways: a legacy server sends a request
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``) while it works on
a call; a 2026-07-28 server ends the call with ``input_required`` and expects the
call again with the answers and its ``requestState``. Agents take input in the same
two ways, so four cases meet here:

- legacy server, legacy agent: the request is relayed to the agent as a request of
  mcpd's own (its own id), and the answer goes back to the server (``DirectAsker``);
- legacy server, modern agent: the agent's call ends with an ``input_required`` of
  mcpd's own making, whose ``requestState`` is an mcpd token; the agent's retry is
  turned back into the answer, and gets the call's next reply (``ParkedAsker``,
  ``Flow``, ``Parks``);
- modern server, legacy agent: mcpd asks the agent each input request as a request,
  then calls the server again with the answers and the same ``requestState``
  (``rounds.legacy_rounds``);
- modern server, modern agent: ``input_required`` passes through; the agent's retry
  goes to the same server like any call.

Only what the agent declared is asked of it; anything else is refused to the server
at once, as it is when the agent disconnects.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from typing import Final, NamedTuple

import msgspec
import trio
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features

from ...servers.shared import NO_ANSWER, AgentKey
from .bound import binding, other_arguments

MAX_ROUNDS: Final = 8
TOKEN_PREFIX: Final = "mcpd-ask:"
_encode: Final = msgspec.json.Encoder().encode


class _Slot:
    __slots__ = ("error", "event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: Raw | None = None
        self.error: rpc.RPCError | None = None


class AgentRequests:
    """Requests mcpd sends one legacy agent (a line connection or an HTTP session),
    matched with the answers it sends back, by ids of mcpd's own."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[rpc.Id, _Slot] = {}
        self.gone: str | None = None

    async def request(self, method: str, params: object, send: Callable[[bytes], bool]) -> Raw:
        """The agent's answer to ``method``; ``send`` puts a line for the agent, and
        says whether it went."""
        if self.gone is not None:
            raise rpc.RPCError(NO_ANSWER, self.gone)
        rid = f"mcpd-{next(self._ids)}"
        line = rpc.encode_request(rid, method, params)
        slot = self._waiting[rid] = _Slot()
        try:
            if not send(line):
                # Nobody will answer what was never sent: the server hears so now.
                raise rpc.RPCError(
                    NO_ANSWER,
                    f"the {method} request could not be sent to the agent: it is not "
                    "reading what mcpd sends it",
                )
            await slot.event.wait()
        except trio.Cancelled:
            if rid in self._waiting and self.gone is None:
                # The server no longer waits: the agent can stop asking its user.
                send(
                    rpc.encode_notification(
                        "notifications/cancelled",
                        {"requestId": rid, "reason": "the server no longer needs it"},
                    )
                )
            raise
        finally:
            self._waiting.pop(rid, None)
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def route(self, msg: rpc.Response | rpc.ErrorResponse) -> bool:
        """An agent's answer to one of these requests; False if it answers none."""
        slot = self._waiting.get(msg.id) if msg.id is not None else None
        if slot is None:
            return False
        if isinstance(msg, rpc.Response):
            slot.result = msg.result
        else:
            slot.error = rpc.RPCError.from_object(msg.error)
        slot.event.set()
        return True

    def refuse(self, given: object, why: str) -> None:
        """An answer under ``given`` (an id as the agent wrote it) that could not be
        taken (``why``): the request it answers, if one waits, fails with that."""
        slot = self._waiting.get(given) if isinstance(given, (str, int)) else None
        if slot is not None and not isinstance(given, bool):
            slot.error = rpc.RPCError(rpc.INVALID_REQUEST, f"its answer could not be taken: {why}")
            slot.event.set()

    def close(self, why: str) -> None:
        """The agent went away: every request still waiting fails now."""
        self.gone = why
        for slot in self._waiting.values():
            slot.error = rpc.RPCError(NO_ANSWER, why)
            slot.event.set()


def _refuse(method: str, params: object, capabilities: rpc.JsonObject | None) -> None:
    if not features.declares(capabilities, method, params):
        need = features.needs(method) or method
        mode = params.get("mode") if isinstance(params, dict) else None
        what = f"{need} ({mode} mode)" if mode else need
        raise rpc.RPCError(
            rpc.METHOD_NOT_FOUND,
            f"the agent behind this request did not declare the {what} capability",
        )


class DirectAsker:
    """A legacy agent, asked directly."""

    direct = True

    def __init__(
        self,
        owner: AgentKey,
        capabilities: rpc.JsonObject | None,
        requests: AgentRequests,
        send: Callable[[bytes], bool],
    ) -> None:
        self.owner = owner
        self.capabilities = capabilities
        self._requests = requests
        self._send = send

    async def ask(self, method: str, params: object) -> Raw:
        _refuse(method, params, self.capabilities)
        return await self._requests.request(method, params, self._send)


# -- a modern agent: input_required of mcpd's own, and the retries that answer it --


class Flow:
    """One agent request's replies, which go to whichever of its retries is waiting."""

    def __init__(
        self,
        owner: AgentKey,
        method: str,
        name: str | None,
        arguments: Raw | UnsetType,
        rid: rpc.Id,
    ) -> None:
        self.owner = owner
        self.method = method
        self.name = name  # the tool's or prompt's local name, or the URI
        self.arguments = binding(arguments)[0]  # what a retry must bring (``binding``)
        self.rid = rid
        self.scope = trio.CancelScope()
        self.lock = trio.Lock()
        self.keys = itertools.count(1)
        self._replies: list[bytes] = []
        self._arrived = trio.Event()

    def taken_by(
        self, owner: AgentKey, method: str, name: str | None, arguments: Raw | UnsetType
    ) -> bool:
        """Whether a retry of ``owner``'s ``method`` of ``name`` with ``arguments`` may
        take these replies."""
        return self.other_call(owner, method, name, arguments) is None

    def other_call(
        self, owner: AgentKey, method: str, name: str | None, arguments: Raw | UnsetType
    ) -> str | None:
        """What call other than this one a retry of ``owner``'s ``method`` of ``name``
        with ``arguments`` is, in the words of mcpd's refusal; None when it is this."""
        if owner is not self.owner:
            return "another agent's call"
        if method != self.method or name != self.name:
            return f"a {self.method} of {self.name!r}"
        return other_arguments(self.arguments, arguments)

    def deliver(self, reply: Callable[[rpc.Id], bytes]) -> None:
        self._replies.append(reply(self.rid))
        self._arrived.set()

    async def next(self) -> bytes:
        """The next reply, for the request now waiting (the first, or a retry)."""
        try:
            while not self._replies:
                self._arrived = trio.Event()
                await self._arrived.wait()
        except BaseException:
            self.scope.cancel()  # nobody waits for it any more
            raise
        return self._replies.pop(0)


class Park:
    __slots__ = ("answer", "event", "flow", "key", "method", "params", "token")

    def __init__(self, flow: Flow, key: str, method: str, params: object) -> None:
        self.flow = flow
        self.key = key
        self.method = method
        self.params = params
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(18)
        self.event = trio.Event()
        self.answer: Raw | rpc.RPCError | None = None


class Parks:
    """Asks waiting for an agent's retry, by the requestState token mcpd gave it."""

    def __init__(self) -> None:
        self._by_token: dict[str, Park] = {}

    def open(self, park: Park) -> None:
        self._by_token[park.token] = park

    def close(self, park: Park) -> None:
        self._by_token.pop(park.token, None)

    def find(self, state: object) -> Park | bool | None:
        """The park a retry's requestState names; True for an mcpd token that names
        none (it expired); None for a server's own state."""
        token = own_token(state, TOKEN_PREFIX)
        if token is None:
            return None
        return self._by_token.get(token) or True

    def owner_gone(self, owner: AgentKey, why: str) -> None:
        for park in [p for p in self._by_token.values() if p.flow.owner is owner]:
            park.answer = rpc.RPCError(NO_ANSWER, why)
            park.event.set()
            park.flow.scope.cancel()


def parked_reply(rid: rpc.Id, park: Park) -> bytes:
    """The reply that ends a modern agent's request with input_required, asking what
    the server asked (``park``); the agent's retry brings the answer."""
    request: dict[str, object] = {"method": park.method}
    if park.params is not None:
        request["params"] = park.params
    result = {
        "resultType": mcp.INPUT_REQUIRED,
        "inputRequests": {park.key: request},
        "requestState": park.token,
    }
    return rpc.encode_result(rid, result)


class ParkedAsker:
    """A modern agent: each request of the server's ends the agent's request with
    input_required, and the agent's retry brings the answer."""

    direct = False

    def __init__(self, flow: Flow, capabilities: rpc.JsonObject | None, parks: Parks) -> None:
        self.flow = flow
        self.owner = flow.owner
        self.capabilities = capabilities
        self._parks = parks

    async def ask(self, method: str, params: object) -> Raw | None:
        _refuse(method, params, self.capabilities)
        async with self.flow.lock:
            park = Park(self.flow, f"mcpd_{next(self.flow.keys)}", method, params)
            self._parks.open(park)
            try:
                self.flow.deliver(lambda rid: parked_reply(rid, park))
                await park.event.wait()
            finally:
                self._parks.close(park)
        if isinstance(park.answer, rpc.RPCError):
            raise park.answer
        return park.answer


class Retry(NamedTuple):
    """An agent's request that brings a ``requestState`` of mcpd's: whose, what it
    asks, with which arguments and answers, under which id."""

    owner: AgentKey
    method: str
    name: str | None
    arguments: Raw | UnsetType
    responses: object
    rid: rpc.Id


def claim(park: Park, retry: Retry) -> Flow:
    """A retry that names ``park``: it takes over the flow's replies, and its answer
    (when it has one for the park's key) goes to the server. One that is another call
    (another agent's, of another tool, with other arguments) is refused, and the park
    waits on for its own."""
    flow = park.flow
    other = flow.other_call(retry.owner, retry.method, retry.name, retry.arguments)
    if other is not None:
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"this requestState is mcpd's and continues {other}")
    flow.rid = retry.rid
    responses = retry.responses
    answer = responses.get(park.key) if isinstance(responses, dict) else None
    if answer is None:
        # Asked again, as a server asks again for what it still needs.
        flow.deliver(lambda r: parked_reply(r, park))
        return flow
    park.answer = Raw(_encode(answer))
    park.event.set()
    return flow


def own_token(state: object, prefix: str) -> str | None:
    """The token of mcpd's that a retry's ``requestState`` is (a JSON string starting
    with ``prefix``), or None for any other state: a server's own."""
    if not isinstance(state, Raw):
        return None
    try:
        token = msgspec.json.decode(state)
    except msgspec.DecodeError:
        return None
    return token if isinstance(token, str) and token.startswith(prefix) else None
