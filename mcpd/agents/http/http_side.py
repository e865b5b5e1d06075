"""HTTP on the agent socket, for people, monitors and HTTP-only MCP clients.

A connection whose first byte is an upper-case letter (an HTTP method; JSON-RPC lines
start with ``{``) is served by h11 instead of the line protocol:

- ``GET /status``: the status JSON, as ``mcpd status --json`` prints it
- ``GET /tools``: the aggregated tools; ``?format=anthropic|openai|openai-responses``
- ``GET /healthz``: 200 when every server is available, else 503 with the reasons
- ``GET /metrics``: Prometheus text
- ``GET /prompts``, ``GET /resources``: the aggregated prompts; resources and templates
  (these read-only pages are ``pages``)
- ``POST /mcp``: Streamable HTTP MCP in both eras, answered by the socket's own
  dispatch (a modern request stands alone; ``initialize`` opens a legacy session
  named by ``Mcp-Session-Id``, which DELETE ends): ``mcp_route``
- ``GET /mcp``: a legacy session's event stream, for what answers no request (list
  changes, resource updates): ``stream``
- ``GET /`` (and ``/page/...``): the status page for people (``page``), to read without
  a session on the socket, and with one (``mcpd dashboard``) on the endpoint

so ``curl --unix-socket /run/mcpd/mcpd.sock http://mcpd/status`` works. Who may
connect is decided by the socket's mode and ``allow_uids``/``allow_groups``, as
for agents. ``?profile=NAME`` picks a profile; a profile's own socket serves that
profile; the status pages of a profile show its servers only. The TCP endpoint
(``tcp``) is this same code behind a ``EndpointDoor`` that checks the bearer token and the
Origin at each request's headers. A connection on a profile's socket that a reload
removes ends as a line connection does (``leave``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

import h11
import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import AgentSession
from protocol.shown.visible import visible_json

from ...policy.deciders.kin import AgentKin
from ...registry.profiles.views import ProfileView
from ...servers.all_servers import AllServers
from ..agent import Agent
from ..answerer import Answerer
from ..daemon_seam import DaemonForAgents
from ..entry.holders import (
    HolderLookup,
    Lookups,
    ServerRefusals,
    TcpKin,
    tcp_held,
    token_bearer,
)
from ..entry.identity import AgentIdentity, Holder
from ..entry.peers import Peer
from ..entry.sockets import Leave
from ..page import is_page
from ..profiles import Profile, Profiles
from .body_budget import BodyBudget, BodyClaim, body_owner
from .endpoint_places import EndpointPlaces, for_page, holder_uid, same_kind
from .exchange import RequestSender
from .headmeter import HEAD_ROOM, HeadRoom
from .headsize import COOKIE_ROOM
from .leave import leaving_refusal, serve_until_left
from .mcp_http import rpc_reject
from .mcp_route import McpRoute
from .pages import ReadPages
from .sessions import LegacySession
from .wire import Headers, Reject, Wire, WireResponse, head, refuse_malformed

if TYPE_CHECKING:
    from ..page.routes import Access, Page
    from .tcp import EndpointDoor

_REQUEST_TIMEOUT = 30.0

logger = logging.getLogger("mcpd.http")

ENDPOINTS: Final = ("/status", "/tools", "/prompts", "/resources", "/healthz", "/metrics", "/mcp")
_encode: Final = msgspec.json.Encoder().encode


class HttpSide:
    def __init__(
        self,
        answerer: Answerer,
        servers: AllServers,
        control: DaemonForAgents,
        listeners: set[Agent],
        end_listens: Callable[[Agent], None],
        new_session: Callable[[], AgentSession],
        profiles: Profiles,
        agents_kin: Callable[[], Awaitable[list[AgentKin]]],
        departed: Callable[[AgentKin], None],
    ) -> None:
        """``listeners``: who hears of list changes, where a listen over HTTP joins them,
        and ``end_listens`` ends one (``mcp_route``); ``agents_kin``: who is kin to each
        agent connected now (``policy.deciders.kin``); ``departed``: told who was kin to an agent
        whose connection ends."""
        self.profiles = profiles
        self._agents_kin = agents_kin
        self._departed = departed
        self.servers = servers
        self.control = control
        self.mcp = McpRoute(
            answerer,
            listeners,
            end_listens,
            new_session,
            self._profile,
            control.approvals.remembered.forget,
        )
        self.pages = ReadPages(servers, control, self._profile, self._scope)
        # The endpoint's connections that got past its gate, counted apart from the
        # agent sockets' (whose door counts those).
        self.on_endpoint = EndpointPlaces()
        # The bytes of request bodies held, on the sockets and the endpoint together.
        self.bodies = BodyBudget()
        # The bytes of the endpoint's heads beyond their own bound, while they arrive.
        self.head_room = HeadRoom(HEAD_ROOM)
        self._page: Page | None = None
        self._refusals = ServerRefusals()
        self._lookups = Lookups(control.server_of, control.relayed_by, control.server_pids)
        # The connections open now that carried a request to /mcp: agents, by the
        # identity each connection was given.
        self.agents: dict[AgentIdentity, RequestSender] = {}

    @property
    def page(self) -> Page:
        """The status page, made for its first request."""
        if self._page is None:
            from ..page.pinsource import pin_sources
            from ..page.policysource import policy_sources
            from ..page.routes import Page

            policy = policy_sources(self.control, self._agents_kin)
            sources = msgspec.structs.replace(
                pin_sources(self.control, self._agents_kin),
                approvals=policy.approvals,
                decide=policy.decide,
                calls=policy.calls,
            )
            self._page = Page(self.control, self.servers, self._agents_kin, sources)
        return self._page

    @property
    def sessions(self) -> dict[str, LegacySession]:
        """The legacy MCP sessions open over HTTP, by ``Mcp-Session-Id``."""
        return self.mcp.sessions

    async def connection(
        self,
        stream: trio.SocketStream,
        peer: Peer | None,
        *,
        fixed: str | None = None,
        gate: EndpointDoor | None = None,
        leave: Leave | None = None,
    ) -> None:
        """Serve one HTTP connection; one through a ``gate`` (the TCP endpoint's) is
        served once its first request's headers have passed it, one on a profile's
        socket until its ``leave`` ends it."""
        # A browser reaches the page on the TCP endpoint alone, with its cookies.
        wire = Wire(stream, COOKIE_ROOM, self.head_room) if gate is not None else Wire(stream)
        identity = AgentIdentity(peer)
        try:
            async with stream:
                try:
                    await self._serve(wire, identity, peer, fixed, gate, leave)
                except h11.RemoteProtocolError as exc:
                    # Not a warning: any client can send as many of these as it likes.
                    logger.debug("a malformed HTTP request: %s", exc)
                    # Here, inside ``with``: once the stream closes, nothing can be said.
                    await refuse_malformed(wire, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            # One broken exchange must not take the daemon (or anyone else) down.
            logger.exception("HTTP connection failed")
        finally:
            agent = self.agents.pop(identity, None)
            if agent is not None:
                # Its processes may outlive the connection (on the TCP endpoint, as
                # read at its first request to /mcp).
                with trio.CancelScope(shield=True):
                    self._departed(await agent.kin())
            self.control.approvals.remembered.forget(identity.connection)
            wire.meter.release()

    async def _serve(
        self,
        wire: Wire,
        identity: AgentIdentity,
        peer: Peer | None,
        fixed: str | None,
        gate: EndpointDoor | None,
        leave: Leave | None,
    ) -> None:
        if gate is None:
            holder = None if peer is None else HolderLookup.of_peer(peer)
            caller = RequestSender(peer, fixed, identity=identity, holder=holder, leave=leave)
            await serve_until_left(leave, wire, partial(self._exchanges, wire, caller, None))
            return
        first = await gate.admit(wire)
        if first is not None:
            await self._serve_endpoint(wire, identity, first, gate)

    async def _serve_endpoint(
        self, wire: Wire, identity: AgentIdentity, first: h11.Request, gate: EndpointDoor
    ) -> None:
        """Serve a connection to the endpoint whose ``first`` request passed its gate,
        in a place of the page's or the agents' (``endpoint_places``): 503 where its
        user has none left."""
        sock = wire.stream.socket
        uid = await holder_uid(sock)
        if uid is not None:
            identity.holder = Holder(uid)
        page = for_page(first)
        with self.on_endpoint.seat(self.control.settings, uid, page) as refusal:
            if refusal is not None:
                await _send(wire, 503, "application/json", _encode({"error": refusal}))
                return
            # Looked up only if a request needs it: the token, the page's session or code.
            holder = HolderLookup(partial(tcp_held, sock, self._lookups))
            tcp = TcpKin(sock, self._lookups)
            caller = RequestSender(None, None, gate.check, identity, holder, tcp, page)
            await self._exchanges(wire, caller, first)

    async def _exchanges(self, wire: Wire, caller: RequestSender, head: h11.Request | None) -> None:
        while True:
            # What its body holds of the budget is held until it is answered.
            with self.bodies.claim(self.control.settings) as claim:
                if not await self._exchange(wire, caller, head, claim):
                    break
            done = wire.conn.our_state is h11.DONE and wire.conn.their_state is h11.DONE
            if wire.broken or wire.closing or not done:
                break
            if wire.leaving and not wire.pipelined():
                break  # answered last what had come before the profile was removed
            wire.conn.start_next_cycle()
            head = None

    async def _exchange(
        self, wire: Wire, caller: RequestSender, head: h11.Request | None, claim: BodyClaim
    ) -> bool:
        """Serve one request (``head``: its head, read and checked already); False when
        the connection is to be closed at once. A page request that nothing vouches for
        (on the endpoint, without the token or a session: a link's code, an OAuth
        landing, a refusal) is answered and its connection closed: kept for another
        request, it would hold one of the places the token's holders count on."""
        stranger = False
        body: bytes | None = None
        try:
            # A client that starts a request and goes quiet must not hold a connection
            # slot forever; idle keep-alive connections wait under the same limit.
            access: Access | None = None
            with trio.move_on_after(_REQUEST_TIMEOUT) as waited:
                if head is None:
                    head = await wire.read_head()
                    if head is not None and caller.guard is not None:
                        caller.guard(head)  # before its body: a refused one is never read
                    if head is not None and caller.page_place is not None:
                        same_kind(head, caller.page_place)
                if head is not None and caller.guard is not None:
                    # The token is no server's (``holders``), checked at the headers too.
                    held = await token_bearer(head, caller.holder, self._refusals)
                    if held is not None and caller.identity is not None:
                        # Its calls are recorded as this user's and process's.
                        caller.identity.holder = held
                if head is not None and is_page(head.target):
                    stranger = wire.closing = _unvouched(head, caller)
                    # The page's own, at the headers too.
                    access = await self.page.admit(head, caller)
                    stranger = wire.closing = stranger and access.session is None
                    if stranger and _declares_body(head):
                        # Nothing it may ask for takes one: a stranger's body would be
                        # held, up to the limit, on nobody's word.
                        raise Reject(413, b'{"error":"this request takes no body"}')
                if head is not None and head.method in _NO_BODY and _declares_body(head):
                    # Nothing mcpd serves reads one; held, it would count against the
                    # bodies' bound for as long as a stream it opens stays open.
                    raise Reject(413, b'{"error":"a GET, HEAD or DELETE request takes no body"}')
                if head is not None:
                    body = await wire.read_body(partial(claim.take, body_owner(caller)))
            if waited.cancelled_caught:
                logger.info(
                    "closing an HTTP connection %s: no complete request within %.0f s",
                    "on the HTTP endpoint" if caller.guard is not None else "on a Unix socket",
                    _REQUEST_TIMEOUT,
                )
                return False
            if head is None or body is None:
                return False
            refused = leaving_refusal(caller.leave, wire, head, body)
            if refused is not None:
                raise refused
            if access is not None:
                query = parse_qs(head.target.decode("latin-1").partition("?")[2])
                await self.page.serve(
                    wire, head, body, caller, access, lambda: self._scope(query, caller)
                )
                return not stranger
            await self._route(wire, head, body, caller)
        except Reject as rejection:
            if wire.conn.their_state is not h11.DONE:  # its body stays unread
                wire.closing = True  # which the answer says, once
            await WireResponse(wire).json(rejection.status, rejection.body, rejection.headers)
            return not stranger
        return True

    async def _route(
        self, wire: Wire, request: h11.Request, body: bytes, caller: RequestSender
    ) -> None:
        path, _, query_text = request.target.decode("latin-1").partition("?")
        query = parse_qs(query_text)
        if path == "/mcp":
            if caller.identity is not None:
                self.agents[caller.identity] = caller
                # On the TCP endpoint, who holds the connection is looked for now, while
                # they hold it: one that closes it before its end is read would leave
                # nothing for ``departed``, and be free to decide.
                await caller.kin()
            await self.mcp.serve(wire, request, body, caller, query)
            return
        page = self.pages.find(path.rstrip("/") or "/")
        if page is None:
            raise Reject(404, _encode({"error": f"no page {path}", "pages": ENDPOINTS}))
        if request.method not in (b"GET", b"HEAD"):
            raise Reject(405, headers=[(b"allow", b"GET, HEAD")])
        status, content_type, content = page(query, caller)
        if content_type == "application/json":
            # These pages are read by people (curl in a terminal), and a server's names
            # and URIs are in them as it wrote them. /mcp is not escaped: agents decode
            # JSON, and what they decode would be the same.
            content = visible_json(content)
        await _send(wire, status, content_type, content, head_only=request.method == b"HEAD")

    # -- pages --

    def _profile(self, query: dict[str, list[str]], caller: RequestSender) -> Profile:
        """The profile ``?profile=`` names, the socket's own, or the default one."""
        asked = query.get("profile")
        name = asked[0] if asked else caller.fixed
        if name is None:
            return self.profiles.default
        try:
            return self.profiles.choose(name, caller.peer, caller.fixed)
        except rpc.RPCError as exc:
            raise rpc_reject(400 if "no profile" in exc.message else 403, None, exc.code,
                             exc.message) from None  # fmt: skip

    def _scope(self, query: dict[str, list[str]], caller: RequestSender) -> ProfileView | None:
        """What of the daemon's status the caller may read (``Profiles.scope``)."""
        return self.profiles.scope(self._profile(query, caller), caller.peer, caller.fixed)


async def _send(
    wire: Wire, status: int, content_type: str, body: bytes, *, head_only: bool = False
) -> None:
    fields = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    events: list[Any] = [head(status, fields)]
    if not head_only:
        events.append(h11.Data(data=body))
    await wire.send(*events, h11.EndOfMessage())


def _unvouched(request: h11.Request, caller: RequestSender) -> bool:
    """On the endpoint, without the token: the gate let it in for the page alone."""
    return caller.guard is not None and Headers(request.headers).get("authorization") is None


_NO_BODY: Final = (b"GET", b"HEAD", b"DELETE")


def _declares_body(request: h11.Request) -> bool:
    headers = Headers(request.headers)
    if headers.get("transfer-encoding") is not None:
        return True
    length = headers.get("content-length")
    return length is not None and length.strip() not in ("", "0")
