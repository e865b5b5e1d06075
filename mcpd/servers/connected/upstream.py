"""One MCP server as mcpd's client sees it: requests in its era, its tools, calls.

No supervision here: an ``Upstream`` wraps a live transport and raises when things go
wrong; the supervisor decides what to do about it. Which era a server speaks is
found out by ``handshake``; this module speaks it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import trio
from msgspec import UNSET, Raw

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.mcp import core as mcp
from protocol.mcp.greeting import ServerCapabilities
from protocol.shown.logfields import log_extra
from transports.base import Params, Transport
from transports.errors import SERVER_REPLIES, SessionExpired, TransportError

from ...config.tables.model import ListLimits
from ...policy.redaction.guard import SecretGuard
from ...policy.redaction.masking import KnownSecrets
from ...registry.gating.limits import DEFAULT_LIMITS
from ...server_row import ServerInfo
from ..asking.askback import ASKING
from ..calling import task_tools
from ..calling.calls import Call, SessionMark
from ..calling.outgoing_meta import CallMeta
from ..lists.tool_pages import FetchCost, LastListing, ListResult, ToolPages
from ..results.taking_apart import ReplyWork
from . import handshake
from .handshake import NO_CAPABILITIES, Greeting, Handshake, client_meta
from .renewal import SessionRenewal

logger = logging.getLogger("mcpd.upstream")


class Upstream:
    def __init__(
        self,
        alias: str,
        transport: Transport,
        *,
        http: bool = False,
        era: str = "auto",
        probe_timeout: float = 5.0,
        renew_timeout: float = 30.0,
        max_pages: int = 1000,
        limits: ListLimits = DEFAULT_LIMITS,
        guard: SecretGuard | None = None,
        work_clock: Callable[[], float] = time.perf_counter,
        replies: ReplyWork | None = None,
        answered: Callable[[], None] = lambda: None,
    ) -> None:
        """``work_clock`` measures what listing tools cost; ``answered`` hears of each
        answer to a request other than a call (a result, or the server's error);
        ``renew_timeout`` bounds a handshake that sets up a lost legacy session again."""
        self.alias = alias
        # Every result and error of a request, and the instructions, pass it.
        self.guard = guard or SecretGuard(KnownSecrets())
        # Where a result that must be taken apart is (its server's: ``taking_apart``).
        self.replies = replies or ReplyWork(alias, self.guard, work_clock)
        self._answered = answered
        self.transport = transport
        # What the last tools/list cost (``list_tools``), fetched whole or not.
        self.list_cost = FetchCost(
            work_clock, lambda: self.transport.read_work, lambda: self.replies.worked
        )
        self.http = http
        self.max_pages = max_pages
        self.limits = limits
        self.era: mcp.Era | None = None
        self.version = ""
        self.capabilities = ServerCapabilities()
        self.instructions: str | None = None
        self.instructions_given: str | None = None  # as the server wrote them
        self.instructions_cut = ""  # what the limit cut of them, if it did
        self.server_info: ServerInfo | None = None
        self.discover_ttl_ms = 0
        self._listed: LastListing | None = None  # the last tools/list
        self._ttl_said: str | None = None  # what the journal was told of its ttlMs
        self._handshake = Handshake(
            alias, transport, http=http, era=era, probe_timeout=probe_timeout
        )
        # What a legacy server is told at initialize that mcpd can answer (relayed to
        # agents); modern servers learn each request's capabilities with the request.
        self.client_capabilities: rpc.JsonObject = NO_CAPABILITIES
        self.meta = CallMeta()  # what agents' requests carry in _meta, for the era
        # Where what a call awaits runs (the session's nursery): a tool that runs only
        # as a task, a legacy HTTP session begun again.
        self.nursery: trio.Nursery | None = None
        # The tools a legacy server runs only as tasks (see task_tools).
        self.task_tools: frozenset[str] = frozenset()
        self.mark = SessionMark()  # this session's, as what is made in it keeps it
        self._renewal = SessionRenewal(alias, transport, self._initialize, renew_timeout)

    # -- lifecycle --

    @property
    def probe_died(self) -> bool:
        """The process exited at the discover probe: start the next one at legacy."""
        return self._handshake.probe_died

    async def connect(self) -> None:
        """Find out which era the server speaks and finish its handshake."""
        await self._adopt(await self._handshake.connect(self.client_capabilities))

    async def _initialize(self) -> None:
        await self._adopt(await self._handshake.initialize(self.client_capabilities))

    async def _adopt(self, greeting: Greeting) -> None:
        self.era, self.version = greeting.era, greeting.version
        self.meta.adopt(greeting.era, greeting.version)
        self.replies.legacy = greeting.era == "legacy"
        self.capabilities = greeting.capabilities
        self.instructions_given = greeting.instructions
        self.instructions, self.instructions_cut = handshake.kept_instructions(
            self.alias, greeting.instructions, self.guard, self.limits.instructions_bytes
        )
        self.server_info = handshake.guarded(greeting.server_info, self.guard, self.alias)
        if greeting.discover_ttl_ms is not None:
            self.discover_ttl_ms = greeting.discover_ttl_ms
        if greeting.era == "legacy":
            await self.transport.notify(
                "notifications/initialized",
                UNSET,
                headers=self._headers("notifications/initialized"),
            )

    # -- requests --

    def _headers(self, method: str, name: str | None = None) -> dict[str, str] | None:
        if not self.http:
            return None
        if self.era == "modern":
            return mcp_headers.request_headers(self.version, method, name)
        return {mcp_headers.PROTOCOL_VERSION: self.version} if self.version else None

    async def request(
        self,
        method: str,
        params: Params,
        *,
        name: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        """One request's result, with every secret mcpd holds masked in it and what it
        asks the agent made fit to pass on (``rpc_results``, where its size says:
        ``taking_apart``), or the JSON-RPC error the server answers with, made fit to
        pass on too (``rpc_errors``, its data where its size says)."""
        raw = await self._answer(
            method, params, name=name, extra_headers=extra_headers, cancellable=cancellable
        )
        return await self._guarded(method, raw)

    async def _guarded(self, method: str, raw: Raw) -> Raw:
        task = method.startswith("tasks/")
        return await self.replies.result(raw, f"a {method} result", task=task)

    async def _answer(
        self,
        method: str,
        params: Params,
        *,
        name: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        """``request``'s result as the server sent it."""
        headers = self._headers(method, name)
        if extra_headers:
            headers = {**(headers or {}), **extra_headers}
        try:
            try:
                raw = await self.transport.request(
                    method, params, headers=headers, cancellable=cancellable
                )
            except SessionExpired:
                await self._renew_session()
                raw = await self.transport.request(
                    method, params, headers=self._headers(method, name), cancellable=cancellable
                )
        except rpc.RPCError as exc:
            self._answered()
            error = exc
        except SERVER_REPLIES:
            self._answered()
            raise
        else:
            self._answered()
            return raw
        masked = await self.replies.error(error, f"a {method} error")
        if masked is error:
            raise error
        raise masked

    async def list_tools(self) -> ListResult:
        """Every page of the server's tools, made into those agents may be shown, with
        what fetching them cost mcpd (``ListResult.cost``): every page read (what the
        transport took to take apart what the server sent meanwhile), searched for
        secrets, taken apart where that is due (``ReplyWork.worked``, in the server's
        thread too) and decoded, and the list compared with the last and checked."""
        cost = self.list_cost
        cost.begin()
        pages = ToolPages(self.alias, self.limits, self.max_pages, self.guard)
        while True:
            raw = await self._answer("tools/list", self._list_params(pages.cursor))
            page = await self._guarded("tools/list", raw)
            with cost.working():
                more = pages.feed(page)
            if self.server_info is None:
                self.server_info = pages.server_info
            if not more:
                break
        if pages.ttl_wrong != self._ttl_said:
            # Once a session, not at every list: a ttl taken as 0 is fetched again often.
            self._ttl_said = pages.ttl_wrong
            if pages.ttl_wrong is not None:
                logger.warning(
                    "%s: tools/list: %s; taken as 0",
                    self.alias,
                    pages.ttl_wrong,
                    extra=log_extra(self.alias),
                )
        with cost.working():
            result, self._listed = pages.result(
                self._listed, self.meta.param_paths if self.http else None
            )
            if self.era == "legacy" and not result.unchanged:
                self.task_tools = task_tools.task_tools(result.tools, self.capabilities.tool_tasks)
        result.cost = cost.seconds
        return result

    def _list_params(self, cursor: str | None) -> Params:
        meta = client_meta(self.version, NO_CAPABILITIES) if self.era == "modern" else UNSET
        if cursor is None and meta is UNSET:
            return UNSET
        return mcp.ListParams(cursor=UNSET if cursor is None else cursor, meta=meta)

    async def _renew_session(self) -> None:
        await self._renewal.wait(self.nursery)

    # -- calls --

    def start(self, call: Call) -> None:
        """Send ``call`` (its name already the server's own) without waiting: its answer
        goes to the call, once (``Transport.send``). It goes spliced around its
        arguments' bytes where nothing of the agent's own goes with it but a progress
        token, else encoded with the era's ``_meta``; a tool the server runs only as a
        task waits for its task in a task of its own. Over Streamable HTTP it goes with
        its headers, in its agent's context (``_send_over_http``). Raises what the
        transport raises when it cannot send at all, or rpc.RPCError for an argument no
        header can carry."""
        call.session = self.mark
        if call.original in self.task_tools:
            if self.nursery is None:
                raise TransportError(f"{self.alias} is not connected")
            self.nursery.start_soon(task_tools.run_call, self.request, self.alias, self.meta, call)
            return
        params = self._params(call)
        if self.http:
            call.sent_id = self._send_over_http(params, call)
        else:
            # No headers, and no session to lose: the transport's own ``send``, the
            # call itself taking the answer.
            call.sent_id = self.transport.send("tools/call", params, call)

    def _params(self, call: Call) -> Params | splice.SplicedCall:
        shape = self._shape(call)
        if shape is None:
            return self.meta.params(call)
        return splice.SplicedCall(shape, call.arguments, call.progress_token)

    def _send_over_http(self, params: Params | splice.SplicedCall, call: Call) -> rpc.Id:
        """Send a call over Streamable HTTP: with its headers, in its agent's context
        (the task the transport waits in starts in it: a legacy server's request on the
        call's stream is asked of the call's agent), sent once more after a new
        handshake if the server forgot the legacy session before it handled it."""
        headers = self._call_headers(call)
        asking = ASKING.set(call.asker)
        try:
            reply = _Renewing(self, call)
            return self.transport.send("tools/call", params, reply, headers=headers)
        finally:
            ASKING.reset(asking)

    def forget(self, call: Call, why: str) -> None:
        """Give ``call`` up: the server is told (``why``), and its answer is dropped."""
        if call.scope is not None:
            call.scope.cancel()  # a task's call: the transport tells the server its way
        elif call.sent_id is not None:
            self.transport.forget(call.sent_id, why)

    def _call_headers(self, call: Call) -> dict[str, str] | None:
        headers = self._headers("tools/call", call.original)
        extra = self.meta.param_headers(call)
        return {**(headers or {}), **extra} if extra else headers

    async def send_in_new_session(self, call: Call, reply: _Renewing) -> None:
        """A call over HTTP whose legacy session the server forgot (``reply``, which
        saw it forgotten): a new handshake, then the call once more."""
        ASKING.set(call.asker)
        try:
            await self._renew_session()
            if call.state == "running":
                headers = self._call_headers(call)
                # Written again: the server may have come back speaking the other era.
                params = self._params(call)
                call.sent_id = self.transport.send("tools/call", params, reply, headers=headers)
        except (TransportError, rpc.RPCError) as exc:
            call(None, exc)

    def _shape(self, call: Call) -> splice.CallShape | None:
        """The constant parts of the call's request, when it goes as them around its
        arguments' bytes: nothing of the agent's own goes along but a progress token
        (None: it is encoded)."""
        if (
            not call.splice
            or call.capabilities
            or call.input_responses is not UNSET
            or call.request_state is not UNSET
        ):
            return None
        own = call.meta
        if own is not None and (len(own) != 1 or mcp.KEY_PROGRESS_TOKEN not in own):
            return None
        return self.meta.shapes.get(call.original) or self.meta.shape(call.original)

    async def listen_for(self, notifications: Mapping[str, object]) -> None:
        """Hold a modern ``subscriptions/listen`` for ``notifications`` (lists, resources,
        tasks) open until the server ends it (returns), cancels it (ServerCancelled) or
        the stream drops."""
        params = {
            "_meta": client_meta(self.version, NO_CAPABILITIES),
            "notifications": dict(notifications),
        }
        await self.request("subscriptions/listen", params)

    @property
    def lists_changes(self) -> bool:
        """Whether the server says it can notify us when its tool list changes."""
        return self.capabilities.tools_changed

    async def probe(self) -> None:
        """A cheap request that proves the server answers (``health``): that a result
        came is all that is read of it, as the transport handed it over (a reply can be
        made as costly to read as the server likes). A legacy server is pinged, which
        its era bids it answer at once, where a list may take as long as its making."""
        if self.era == "modern":
            params = mcp.MetaOnlyParams(meta=client_meta(self.version, NO_CAPABILITIES))
            await self._answer("server/discover", params, cancellable=False)
        else:
            await self._answer("ping", UNSET)


class _Renewing:
    """Where the answer to a call over HTTP goes: to the call, unless the server forgot
    its legacy session before it handled the call (it cannot have run), which is then
    begun again and the call sent once more."""

    __slots__ = ("_again", "_call", "_up")

    def __init__(self, up: Upstream, call: Call) -> None:
        self._up, self._call = up, call
        self._again = True

    def __call__(self, raw: Raw | None, error: Exception | None) -> None:
        nursery = self._up.nursery
        if self._again and isinstance(error, SessionExpired) and nursery is not None:
            self._again = False
            nursery.start_soon(self._up.send_in_new_session, self._call, self)
        else:
            self._call(raw, error)
