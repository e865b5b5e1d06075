"""``/mcp`` on the agent socket: MCP over HTTP in both eras, answered by the socket's
own dispatch.

A modern request (2026-07-28) stands alone: it names its protocol version in a
header, one stateless session answers it, and a client that hangs up cancels it.
What it leaves behind (a task, a call waiting for an answer) is held for its
``StatelessAgent``, the same for each of its requests on any connection.
``initialize`` without a modern version opens a legacy session instead, named by
``Mcp-Session-Id``, that keeps the profile chosen then, the requests in flight
(so ``notifications/cancelled`` finds them), what servers asked the agent and the
news for it that answers no request, which its GET stream carries
(``stream``); DELETE ends it. A legacy session is found only where and by whom
it was opened (``sessions``): one route serves the daemon's socket, each
profile's and the TCP endpoint, and an id that another user, another listener or one
of mcpd's servers brings names no session there. Either way a POST becomes an
``Exchange``, whose messages before its answer turn the response into an event stream.
On a profile's socket that a reload removes, what is in flight ends as ``leave``
says, and the sessions opened there end once its connections are closed.

It is apart from ``http_side`` (the connection and the routing; ``pages``, the
read-only pages) because only this part has sessions, requests in flight and the
listeners' list changes; ``mcp_http`` holds the Streamable HTTP rules it checks
requests against.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Final

import h11
import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession

from ...servers.shared import AgentKey
from ..agent import Agent
from ..answerer import Answerer
from ..profiles import Profile
from .body_budget import check_listen
from .exchange import Exchange, RequestSender, StatelessAgent
from .leave import Grace
from .mcp_http import (
    MODERN_STATUS,
    accepts,
    check_post,
    decode_body,
    modern_request,
    not_allowed,
    rpc_reject,
)
from .sessions import DELETED, PUSHED_OUT, REMOVED, LegacySession, OpenedBy, holder_of
from .stopping import Answering
from .stream import serve_stream
from .wire import HeaderList, Headers, Reject, Wire, WireResponse

MAX_SESSIONS: Final = 256
_VERSION_KEY: Final = f'"{mcp.KEY_PROTOCOL_VERSION}"'.encode()

# The profile a request asks for (``?profile=``), as the HTTP side decides it.
ChooseProfile = Callable[[dict[str, list[str]], RequestSender], Profile]


class McpRoute:
    def __init__(
        self,
        answerer: Answerer,
        listeners: set[Agent],
        end_listens: Callable[[Agent], None],
        new_session: Callable[[], AgentSession],
        choose_profile: ChooseProfile,
        forget: Callable[[str], None],
    ) -> None:
        """``forget``: told each session's connection id when it ends (what was
        approved for it goes with it)."""
        self.answerer = answerer
        self._forget = forget
        # A listen over HTTP gets the list changes the socket's agents get, and ends
        # (``end_listens``) as theirs do when the profile's socket is removed.
        self.listeners = listeners
        self._end_listens = end_listens
        self.new_session = new_session
        self._profile = choose_profile
        # Modern requests carry everything they need: one session answers them all.
        self.stateless = new_session()
        self.sessions: dict[str, LegacySession] = {}
        # A stateless client has no connection to be: one object for each who it can be.
        self._owners: dict[StatelessAgent, AgentKey] = {}
        self.answering = Answering()  # the requests being answered, which a stop ends

    async def serve(
        self,
        wire: Wire,
        request: h11.Request,
        body: bytes,
        caller: RequestSender,
        query: dict[str, list[str]],
    ) -> None:
        headers = Headers(request.headers)
        if request.method == b"DELETE":
            sid = headers.get("mcp-session-id")
            legacy = self._found(sid, caller)
            if sid is None or legacy is None:
                raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
            del self.sessions[sid]
            self._end(legacy, DELETED)
            await WireResponse(wire).json(200, b"")
            return
        if request.method == b"GET":
            await self._stream(wire, request, headers, caller)
            return
        if request.method != b"POST":
            raise not_allowed(request.method)
        check_post(headers)
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.stateless.legacy_versions:
            await self._modern(wire, headers, body, version, caller, query)
        else:
            await self._legacy(wire, headers, body, caller, query)

    async def _stream(
        self, wire: Wire, request: h11.Request, headers: Headers, caller: RequestSender
    ) -> None:
        """GET: a legacy session's stream for what answers no request; one at a time."""
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.stateless.legacy_versions:
            message = (
                f"Method Not Allowed: {version} has no GET stream; "
                "list changes come on a subscriptions/listen"
            )
            raise Reject(
                405,
                rpc.encode_error(None, rpc.INVALID_REQUEST, message),
                [(b"allow", b"POST")],
            )
        if not accepts(headers.get("accept"), "text/event-stream"):
            message = (
                "Not Acceptable: GET /mcp opens a legacy session's event stream and needs "
                "Accept: text/event-stream and its Mcp-Session-Id; MCP messages go by POST"
            )
            raise rpc_reject(406, None, rpc.INVALID_REQUEST, message)
        sid = headers.get("mcp-session-id")
        if sid is None:
            message = (
                "Bad Request: Missing session ID (GET /mcp opens the event stream of a "
                "session that initialize opened)"
            )
            raise rpc_reject(400, None, rpc.INVALID_REQUEST, message)
        legacy = self._found(sid, caller)
        if legacy is None:
            raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        if legacy.news.streaming:
            message = "Conflict: this session's event stream is already open (one per session)"
            raise rpc_reject(409, None, rpc.INVALID_REQUEST, message)

        def allowed() -> bool:
            # A stream outlives the request that opened it: a rotated token ends it.
            try:
                if caller.guard is not None:
                    caller.guard(request)
            except Reject:
                return False
            return True

        ends = None if caller.leave is None else caller.leave.asked
        await serve_stream(wire, legacy.news, allowed, ends)

    def _open(self, session: AgentSession, profile: Profile, caller: RequestSender) -> str:
        """A new legacy session's id. When there are too many, the oldest of the user
        who holds the most ends (the newcomer counted with its own): one who opens
        sessions without end ends their own, not everyone else's."""
        identity = caller.who().new_session()
        if len(self.sessions) >= MAX_SESSIONS:
            self._end(self.sessions.pop(self._to_end(holder_of(identity))), PUSHED_OUT)
        sid = secrets.token_hex(16)
        legacy = LegacySession(session, profile, identity, OpenedBy.of(caller))
        self.sessions[sid] = legacy
        legacy.news.sid = sid
        self.answerer.agent_joined(legacy.news)  # its news from now on
        return sid

    def _found(self, sid: str | None, caller: RequestSender) -> LegacySession | None:
        """The legacy session ``sid`` for the one that opened it, where it was opened;
        for anyone else, or on another listener, there is none."""
        legacy = None if sid is None else self.sessions.get(sid)
        if legacy is None or legacy.opened_by != OpenedBy.of(caller):
            return None
        return legacy

    def opened_on(self, profile: str) -> Callable[[], int]:
        """What ends the sessions opened on ``profile``'s own socket now, as a DELETE
        would, once a reload removed the profile and its connections are closed; it
        says how many were still open. Those opened later (the profile added back) are
        not among them."""
        opened = [
            sid
            for sid, legacy in self.sessions.items()
            if legacy.opened_by.fixed == profile and not legacy.opened_by.endpoint
        ]

        def end() -> int:
            ended = 0
            for sid in opened:
                legacy = self.sessions.pop(sid, None)  # None: its client ended it since
                if legacy is not None:
                    self._end(legacy, REMOVED)
                    ended += 1
            return ended

        return end

    def _to_end(self, newcomer: int | None) -> str:
        held = Counter(holder_of(legacy.identity) for legacy in self.sessions.values())
        mine = held[newcomer] + 1
        most = max(mine, *held.values())
        if held[newcomer] and mine == most:
            holder = newcomer  # a tie ends the newcomer's own
        else:  # the holder of the oldest session among those who hold the most
            holder = next(h for h, n in held.items() if n == most)
        return next(sid for sid, s in self.sessions.items() if holder_of(s.identity) == holder)

    def _end(self, legacy: LegacySession, why: str) -> None:
        legacy.close(why)
        self._forget(legacy.identity.connection)
        self.answerer.agent_gone(legacy)  # its subscriptions end with it

    def _exchange_for(
        self,
        session: AgentSession,
        caller: RequestSender,
        profile: Profile,
        legacy: LegacySession | None = None,
    ) -> Exchange:
        if legacy is not None:
            identity = caller.who().in_session(legacy.identity)
            asks, news = legacy.asks, legacy.news
            return Exchange(session, caller, profile, legacy, identity, asks, news)
        owner = self._owners.setdefault(caller.stateless_agent(profile), AgentKey())
        return Exchange(session, caller, profile, owner, caller.who())

    async def _modern(
        self,
        wire: Wire,
        headers: Headers,
        body: bytes,
        version: str,
        caller: RequestSender,
        query: dict[str, list[str]],
    ) -> None:
        req, _ = modern_request(headers, body, version, self.stateless)
        check_listen(req, body)
        exchange = self._exchange_for(self.stateless, caller, self._profile(query, caller))
        await self._answer(wire, exchange, req, trio.CancelScope(), modern=True)

    async def _legacy(
        self,
        wire: Wire,
        headers: Headers,
        body: bytes,
        caller: RequestSender,
        query: dict[str, list[str]],
    ) -> None:
        msg = decode_body(body)
        if isinstance(msg, rpc.Request) and msg.method == "initialize":
            session = self.new_session()
            profile = self._profile(query, caller)
            reply = self.answerer.answer_now(self._exchange_for(session, caller, profile), msg)
            extra: HeaderList = []
            if session.legacy_version is not None:
                extra.append((b"mcp-session-id", self._open(session, profile, caller).encode()))
            await WireResponse(wire).json(200, reply, extra)
            return
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if isinstance(msg, rpc.Request) and _VERSION_KEY in bytes(msg.params or b""):
                # A 2026-07-28 request without its header is taken for a legacy one
                # (as the spec says), whose missing session would be the wrong lead.
                raise rpc_reject(
                    400,
                    msg.id,
                    rpc.INVALID_REQUEST,
                    "Bad Request: a 2026-07-28 request needs the MCP-Protocol-Version "
                    "header (and Mcp-Method); without it the request is taken for a "
                    "2025-03-26 one, which needs a session from initialize",
                )
            raise rpc_reject(400, None, rpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        legacy = self._found(session_id, caller)
        if legacy is None:
            raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        if isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled":
                _cancel(legacy, msg)
            raise Reject(202)
        if not isinstance(msg, rpc.Request):
            legacy.asks.route(msg)  # the agent's answer to what a server asked it
            raise Reject(202)
        exchange = self._exchange_for(legacy.session, caller, legacy.profile, legacy)
        if msg.id in legacy.requests:
            # Refused at once, as on the socket, and recorded as there (a call leaves
            # its record whatever it came to).
            self.answerer.router.records.turned_away(exchange, msg)
            raise rpc_reject(400, msg.id, rpc.INVALID_REQUEST, f"Request id {msg.id!r} is in use")
        check_listen(msg, body)
        scope = legacy.requests[msg.id] = trio.CancelScope()
        try:
            await self._answer(wire, exchange, msg, scope, modern=False)
        finally:
            legacy.requests.pop(msg.id, None)

    async def _answer(
        self,
        wire: Wire,
        exchange: Exchange,
        req: rpc.Request,
        scope: trio.CancelScope,
        *,
        modern: bool,
    ) -> None:
        with self.answering.held(exchange, req, scope):
            try:
                await self._answer_held(wire, exchange, req, scope, modern)
            finally:
                # A call's record says whether its answer went out (``callrecords``).
                call = exchange.calls_in_tasks.get(req.id)
                if call is not None:
                    self.answerer.router.records.release(call, gone=wire.broken)

    async def _answer_held(
        self,
        wire: Wire,
        exchange: Exchange,
        req: rpc.Request,
        scope: trio.CancelScope,
        modern: bool,
    ) -> None:
        response = WireResponse(wire, scope)
        reply: bytes | None = None
        # A listen gets the list changes the socket's agents get.
        listening = req.method == "subscriptions/listen"
        if listening:
            self.listeners.add(exchange)
        # On a profile's socket a reload removes: a listen ends at once, the rest in time.
        ends_now = partial(self._end_listens, exchange) if listening else None
        grace = Grace(exchange.caller.leave, ends_now)
        try:
            async with trio.open_nursery() as nursery:

                async def cancel_on_hangup() -> None:
                    # Closing the connection is how a client cancels (2026-07-28).
                    await wire.wait_gone()
                    scope.cancel()

                pumped = trio.Event()
                nursery.start_soon(cancel_on_hangup)
                nursery.start_soon(exchange.pump, response, pumped)
                nursery.start_soon(grace.keep, scope)
                with scope:
                    reply = await self.answerer.dispatch(exchange, req)
                if reply is None:
                    reply = self.answering.answer(exchange) or grace.late(req.id)
                if reply is None and isinstance(exchange.owner, LegacySession):
                    call = exchange.calls_in_tasks.get(req.id)
                    out = None if call is None else call.out
                    reply = exchange.owner.cut_short(req.id, out)  # ended by a DELETE, say
                exchange.outbox.close()
                await pumped.wait()
                nursery.cancel_scope.cancel()
        finally:
            if listening:
                self.listeners.discard(exchange)
        if wire.broken:
            return
        status = 200
        if reply is not None and modern:
            decoded = envelope.decode_message(reply)
            if isinstance(decoded, rpc.ErrorResponse):
                status = MODERN_STATUS.get(decoded.error.code, 200)
        await response.finish(reply, status)


def _cancel(legacy: LegacySession, msg: rpc.Notification) -> None:
    try:
        target = rpc.decode_as(msg.params, mcp.CancelledParams).requestId
    except rpc.InvalidParams:
        return
    scope = legacy.requests.get(target) if isinstance(target, int | str) else None
    if scope is not None:
        scope.cancel()
