"""One agent connection: each line its reader hands on is a request answered at once
(the lifecycle), a call started without a task, a request run in a task of its own, a
notification, or an answer to what a server asked; what it has in flight is kept by id
until it ends, is cancelled, or the agent hangs up (its ``RequestsInFlight``, of
``ending``, which also ends them as the connection ends). Every reply and notification
goes out through its outbox, in order."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import trio
from msgspec import UNSET

from protocol.jsonrpc import envelope, splice
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.splice import SplicedRequest
from protocol.lines.framing import Oversized
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

from ...config.tables.model import DaemonConfig
from ...policy.deciders.kin import AgentKin, unknown_kin
from ...servers.shared import AgentKey, Outcome, ProgressSink
from ..agent import Agent, AgentCall
from ..answerer import LIFECYCLE, Answerer
from ..askback.askers import AgentRequests, DirectAsker
from ..askback.call_rounds import Had
from ..askback.driver import may_be_asked
from ..askback.rounds import shedding
from ..daemon_seam import Lines
from ..entry.dial import COMMAND_LINE, TELL_WAITS
from ..entry.identity import AgentIdentity
from ..entry.peers import Peer
from ..entry.unfinished import LineHold
from ..profiles import Profile
from .batches import Batches
from .ending import RequestsInFlight, refuse_cut
from .failures import kind_of
from .line_reader import LineReader, Unfinished, apart_from_line
from .misbehaviour import Misbehaviour
from .outbox import Outbox

_TOOLS_CALL: Final = b'"tools/call"'
_OWN_METHODS: Final = "mcpd/"


class Connection(Agent):
    """One agent on a socket, speaking JSON lines."""

    # Its first line was ``dial.COMMAND_LINE``; `mcpd bridge` relays after its own.
    command_line, _heard = False, False

    def __init__(
        self,
        answerer: Answerer,
        stream: trio.SocketStream,
        session: AgentSession,
        lines: Lines,
        limits: DaemonConfig,
        *,
        version: int,
        profile: Profile,
        line_hold: LineHold,
        peer: Peer | None = None,
        fixed_profile: str | None = None,
    ) -> None:
        self.answerer = answerer
        self.router = answerer.router
        self.splice = self.router.splice
        self.stream = stream
        self.session = session
        self.peer = peer
        self.identity = AgentIdentity(peer)
        self.owner = self.listen_owner = AgentKey()  # who it is, to what it leaves at mcpd
        # The profile the agent sees, and the one its socket fixes.
        self.profile = profile
        self.fixed_profile = fixed_profile
        self.subscriptions: set[rpc.Id] = set()
        # The request contexts of the _meta this agent sends again and again.
        self.contexts: dict[bytes, RequestContext] = {}
        self.seen_version = version  # its profile's version whose changes it has been told
        self.asks = AgentRequests()  # what servers ask this agent through mcpd
        self.refusing_asker = DirectAsker(self.owner, None, self.asks, self.offer)
        self.progress: ProgressSink = self.send_progress  # where its calls' progress goes
        # Run when the agent hangs up, before anything else: a server waiting for this
        # agent's answer must hear at once that none is coming.
        self.gone_hooks: list[Callable[[], None]] = []
        self.dropped = 0
        self.asked = trio.Event()  # it has sent a request (the door waits for one)
        self.faults = Misbehaviour()
        self._nursery: trio.Nursery | None = None
        self._outbox = Outbox(lines, stream, self.label, self.close)
        limit = limits.max_inflight_per_connection
        self.inflight = RequestsInFlight(self, self.router, limit, self._outbox, self.faults)
        self.calls_in_tasks = self.inflight.calls_in_tasks  # as every agent's handlers read it
        # Its parts, held here too: a call's reply reads them without another lookup.
        self._out = self._outbox.out
        self._long = self._outbox.long
        self.batches: Batches | None = self._outbox.batches  # its JSON-RPC batches
        self._put = self._outbox.put
        self._unbatch = self._outbox.unbatch
        self.line_limit = limits.max_line_bytes  # what it was opened with, a reload aside
        self._reader = LineReader(lines, stream, self.line_limit, self._out, self._line, line_hold)

    async def kin(self) -> AgentKin:
        # As /proc told when it connected.
        if self.peer is None:
            return unknown_kin("the kernel did not say who connected", None)
        return self.peer.kin

    def news_sender(self) -> Callable[[bytes], None]:
        """Where what answers no request goes later (a subscribed resource's updates)."""
        return self.send_nowait

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._outbox.run)
            try:
                await self._hung_up(await self._reader.run(nursery))
            finally:
                self.asks.close("the agent disconnected")  # also when the daemon stops
                self.inflight.let_go()  # the daemon stops
                nursery.cancel_scope.cancel()
                self.faults.log_totals(self.label)

    async def _hung_up(self, cut: Oversized | Unfinished | None) -> None:
        """The agent hung up, or sent a line over the limit or one that did not fit or
        end in time (``cut``): it is told why nothing after that line is read, and what
        it has in flight is given up."""
        if cut is not None:
            await refuse_cut(cut, self.label, self.send)
        self.asks.close("the agent disconnected")
        for hook in self.gone_hooks:
            hook()
        # What is already queued for it still goes out if it can.
        self.inflight.let_go()
        with trio.move_on_after(1):
            await self.drain()

    def stopping(self) -> None:
        """mcpd stops: what it has in flight is answered now (``RequestsInFlight``)."""
        self.inflight.stopping(self.session.legacy_version is None)

    async def leave(self, reason: str, grace: float) -> None:
        """End the connection for ``reason`` (``RequestsInFlight.leave``), then close it.
        Lines go on being read meanwhile: a cancellation, or the answer to what a server
        asked the agent, may be what a call in flight waits for."""
        await self.inflight.leave(reason, grace)
        with trio.move_on_after(1):
            await self.drain()
        self.close()

    def _line(self, line: bytes, nursery: trio.Nursery) -> None:
        # What raises here, nothing expected (a fault in mcpd): it costs this line's
        # request alone, never the connection or the daemon.
        first, self._heard = not self._heard, True
        try:
            if _TOOLS_CALL in line and self.splice:
                # The hot path: the request decoded once, typed; no task, no cancel scope;
                # its outcome is written from a callback when the server answers.
                decoded = splice.decode_call(line)
                if decoded is not None:
                    self.spoke_mcp = not self.command_line
                    self.asked.set()
                    rid, inflight = decoded.id, self.inflight
                    requests = inflight.requests
                    if rid in requests or len(requests) >= inflight.limit or inflight.leaving:
                        inflight.admit(rid, True, decoded)  # refused, saying why
                    else:
                        self._call(rid, decoded, nursery)
                    return
            try:
                msg = envelope.decode_message(line)
            except rpc.DecodeFailure as exc:
                if self.batches is not None and line.lstrip()[:1] == b"[":
                    # A JSON-RPC batch: each message as if it came alone, answered together.
                    reused = functools.partial(self.router.records.turned_away, self)
                    for message in self.batches.start(
                        line, self.inflight.requests, self.send_nowait, reused
                    ):
                        self._line(message, nursery)
                    return
                self.faults.invalid_line(self.label, exc.message)
                self.send_nowait(exc.reply())
                if isinstance(exc, rpc.MalformedResponse):
                    # An answer to what a server asked, that cannot be taken: the
                    # question ends with it, rather than wait for one that came.
                    self.asks.refuse(exc.given, exc.why)
                return
            if first and isinstance(msg, rpc.Notification) and msg.method == COMMAND_LINE:
                self.command_line = True
            if not self.spoke_mcp and isinstance(msg, (rpc.Request, rpc.Notification)):
                own = self.command_line or msg.method.startswith(_OWN_METHODS)
                self.spoke_mcp = not own
            if isinstance(msg, rpc.Request):
                self.asked.set()
                if not self.inflight.admit(msg.id, msg.method not in LIFECYCLE, msg):
                    pass
                elif msg.method in LIFECYCLE:
                    self._put(self.answerer.answer_now(self, msg), msg.id)
                elif msg.method == "tools/call":
                    self._call(msg.id, msg, nursery)
                else:
                    apart_from_line(msg)
                    answer = functools.partial(self.answerer.dispatch, self, msg)
                    self._spawn(msg.id, msg.method, answer, nursery)
            elif isinstance(msg, rpc.Notification):
                self._notification(msg)
            else:
                # An answer to what a server asked this agent; any other is ignored.
                self.asks.route(msg)
        except Exception as exc:
            failed = self.answerer.failures.of_line(self.label, line, exc)
            if failed is not None:
                self.send_nowait(*failed)

    def _call(
        self, rid: rpc.Id, request: SplicedRequest | rpc.Request, nursery: trio.Nursery
    ) -> None:
        try:
            call = self.router.call_of(self, request)
        except rpc.RPCError as exc:
            self.router.unreadable(self, exc.message)
            self._put(rpc.encode_error(rid, exc.code, exc.message, exc.data), rid)
            return
        except rpc.InvalidParams as exc:
            self.router.unreadable(self, f"Invalid params: {exc}")
            self._put(rpc.encode_error(rid, rpc.INVALID_PARAMS, f"Invalid params: {exc}"), rid)
            return
        except Exception as exc:
            self.router.unreadable(self, f"mcpd failed: {kind_of(exc)}")
            self._put(self.answerer.failures.reply(self.label, rid, "tools/call", exc), rid)
            return
        caps = call.out.ctx.capabilities
        if caps and may_be_asked(caps):
            # Its server may ask the agent things back: the call waits in a task.
            answer = functools.partial(self.router.serve, call)
            self._spawn(rid, "tools/call", answer, nursery, call)
            return
        self.inflight.requests[rid] = call
        try:
            self.router.start(call)
        except Exception as exc:
            self._call_failed(call, exc)

    def _call_failed(self, call: AgentCall, exc: Exception) -> None:
        """A call started without a task whose way raised: its record says so, and
        unless it was answered already, its server lets it go and the agent hears why."""
        self.router.records.failed(call, exc)
        rid = call.out.id
        if self.inflight.requests.get(rid) is not call:
            self.answerer.failures.log(self.label, "tools/call", exc, answered=False)
            return
        self.inflight.forget(rid)
        call.let_go()
        self._put(self.answerer.failures.reply(self.label, rid, "tools/call", exc), rid)

    def _spawn(
        self,
        rid: rpc.Id,
        method: str,
        answer: Callable[[], Awaitable[bytes | None]],
        nursery: trio.Nursery,
        call: AgentCall | None = None,
    ) -> None:
        """Answer a request (``call``, when it is a tools/call) in a task of its own."""
        scope = trio.CancelScope()
        self.inflight.requests[rid] = scope
        if call is not None:  # answered as a call if mcpd stops
            self.calls_in_tasks[rid] = call
        nursery.start_soon(self._run_request, rid, method, answer, scope)

    def in_task(self, call: AgentCall, answer: Callable[[], Awaitable[bytes]]) -> None:
        if self._nursery is None:  # not reading lines: every call came to ``run``
            self.finish(call, rpc.RPCError(rpc.INTERNAL_ERROR, "mcpd cannot wait here"))
            return
        self._spawn(call.out.id, "tools/call", answer, self._nursery, call)  # in place of it

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        """A call's one outcome: its reply, written now, unless the agent cancelled the
        call meanwhile. A spliced reply goes out unchecked when nothing holds it back."""
        rid, inflight = call.out.id, self.inflight
        if inflight.requests.get(rid) is None:
            return
        sent = call.let_through  # None: it ended where it was routed
        if sent is not None and not call.modern and self._nursery is not None:
            # Its head as the scheduler read it, when it did: not read again.
            shed = shedding(outcome, call.out.head)
            if shed is not None:
                # The server asks to be called again with its state: mcpd does so for an
                # agent of the era before, which would not know how.
                resume = functools.partial(self.router.serve, call, Had(outcome, shed, sent))
                self._spawn(rid, "tools/call", resume, self._nursery, call)
                return
        inflight.forget(rid)
        try:
            line, spliced = self.router.reply(call, outcome)
        except Exception as exc:
            self.router.records.failed(call, exc)
            self._put(self.answerer.failures.reply(self.label, rid, "tools/call", exc), rid)
            return
        if spliced and self._long.held is None and not (self.batches and rid in self.batches):
            self._out.put_spliced(line)
        else:
            self._put(line, rid)

    def _notification(self, msg: rpc.Notification) -> None:
        if msg.method == TELL_WAITS:
            self.tells_waits = True
        elif msg.method == "notifications/cancelled":
            try:
                params = rpc.decode_as(msg.params, mcp.CancelledParams)
            except rpc.InvalidParams:
                return
            if params.requestId is not UNSET:
                self.inflight.cancelled(params.requestId)

    async def _run_request(
        self,
        rid: rpc.Id,
        method: str,
        answer: Callable[[], Awaitable[bytes | None]],
        scope: trio.CancelScope,
    ) -> None:
        try:
            try:
                with scope:
                    reply = await answer()
            except BaseException as exc:
                # Left to go up, a fault in mcpd would end the connection's nursery, and
                # the daemon's; it costs this request alone.
                put = functools.partial(self._put, rid=rid)
                self.answerer.failures.of_task(self.label, rid, method, exc, scope, put)
                return
            if scope.cancelled_caught:
                return  # the agent cancelled it: no response, as the protocol says
            if reply is not None:
                await self.send(reply, rid)
        finally:
            self.inflight.forget(rid)
            self._unbatch(rid)  # cancelled, or answered some other way

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        """Send a reply; waits while too much is queued (the peer is slow to read)."""
        await self._out.wait_room()
        self._put(data, rid)

    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        if self._out.queued > self._out.limit:
            self.dropped += 1
            if rid is not None:
                self._unbatch(rid)  # its batch must not wait for what was dropped
            return False
        self._put(data, rid)
        return True

    async def send_long(self, rid: rpc.Id, pieces: Iterable[bytes | memoryview]) -> bool:
        """Send a reply made piece by piece as the agent reads it (``LongReplies``),
        unless its batch answers ``rid`` whole. Lines sent meanwhile follow it."""
        if self.batches and rid in self.batches:
            return False
        await self._long.send(pieces)
        return True

    async def drain(self) -> None:
        await self._out.drain()

    def close(self) -> None:
        """End the connection: its read loop and writer stop, and ``run`` returns."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
