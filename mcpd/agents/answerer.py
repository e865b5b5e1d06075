"""``Answerer``: an agent's requests answered, whichever way they came (a line of the
socket's ``connection.agent_connection.Connection``, or an exchange of ``/mcp``): the
lifecycle at once, in arrival order (``answer_now``), every other method by its name
(``dispatch``): a tools/call by the ``Router``, tools/list and listens here, mcpd's own
methods by the table ``agent_server.AgentServer`` hands it, prompts, resources, tasks
and the like by ``ExtraMethods``. It also hears of the agents that begin and end
without a connection of their own (HTTP sessions).

It imports no connection and nothing of HTTP: those hand it their requests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ..servers.all_servers import AllServers
from ..servers.shared import AgentKey
from .agent import Agent, Audience
from .beyond_tools.extra_methods import ExtraMethod, ExtraMethods
from .calls.result_eras import with_result_type
from .calls.toolcall import Router
from .connection.failures import Failures
from .daemon_seam import DaemonForAgents
from .lists.instructions import instructions
from .lists.toollist import in_pieces, list_tools
from .news.listen import Listens
from .own_methods.profile_bound import refuse_beyond

# Answered as they are read, in arrival order: cheap, and what follows may depend on them.
LIFECYCLE: Final = frozenset({"initialize", "ping", "server/discover"})


class Answerer:
    """What an agent's connection (or HTTP exchange) hands its requests to."""

    def __init__(
        self,
        servers: AllServers,
        control: DaemonForAgents,
        router: Router,
        failures: Failures,
        extras: ExtraMethods,
        listens: Listens,
        own: Mapping[str, ExtraMethod],
    ) -> None:
        """``own``: mcpd's own methods (``own_methods``), each bound to the server
        that holds what they read."""
        self.servers = servers
        self.control = control
        self.router = router  # where its tools/call go
        self.failures = failures  # what a request that raised is answered with, and its log
        self.extras = extras
        self.listens = listens
        # Refused past the profile a connection is held to (``profile_bound``).
        self._own: dict[str, ExtraMethod] = {
            "tools/list": self._tools_list,
            "subscriptions/listen": self._listen,
            **own,
        }
        self._extra = extras.handlers()

    def agent_joined(self, conn: Audience) -> None:
        """An agent without a connection of its own (an HTTP session) has begun."""
        self.extras.joined(conn)

    def agent_gone(self, owner: AgentKey) -> None:
        """An agent without a connection of its own (an HTTP session) has ended."""
        self.extras.left(owner)

    def answer_now(self, conn: Agent, req: rpc.Request) -> bytes:
        """The lifecycle methods, answered in order as they arrive: a request sent right
        after ``initialize`` must find the session set up."""
        session = conn.session
        try:
            if req.method == "initialize":
                conn.contexts.clear()  # a legacy context may change with the session
                session.instructions = self.instructions(conn)
                return rpc.encode_result(req.id, session.initialize(req.params))
            if req.method == "ping":
                return self._finish(req.id, session.ping_context(req), {})
            ctx = session.context(req)
            session.instructions = self.instructions(conn)
            return self._finish(req.id, ctx, session.discover(ctx))
        except Exception as exc:
            return self._error_reply(conn, req, exc)

    async def dispatch(self, conn: Agent, req: rpc.Request) -> bytes | None:
        """The encoded reply, or None when the handler already sent it."""
        session = conn.session
        try:
            if req.method in LIFECYCLE:
                return self.answer_now(conn, req)
            if req.method == "tools/call":  # over HTTP: decoded once, awaited here
                call = conn.calls_in_tasks[req.id] = self.router.call_of(conn, req)
                return await self.router.serve(self.router.records.held_until_written(call))
            ctx = session.context(req)
            handler = self._own.get(req.method)
            result: object
            if handler is not None:
                if conn.fixed_profile is not None:
                    refuse_beyond(conn.fixed_profile, req.method)
                result = await handler(conn, req, ctx)
            elif req.method in self._extra:
                result = await self._extra[req.method](conn, req, ctx)
            else:
                raise rpc.RPCError(rpc.METHOD_NOT_FOUND, f"Method not found: {req.method}")
            if result is None or isinstance(result, bytes):
                return result
            return self._finish(req.id, ctx, result)
        except Exception as exc:
            return self._error_reply(conn, req, exc)

    def _error_reply(self, conn: Agent, req: rpc.Request, exc: Exception) -> bytes:
        if isinstance(exc, rpc.RPCError):
            return rpc.encode_error(req.id, exc.code, exc.message, exc.data)
        if isinstance(exc, rpc.InvalidParams):
            return rpc.encode_error(req.id, rpc.INVALID_PARAMS, f"Invalid params: {exc}")
        # A fault in mcpd costs this request alone (the socket's connection, an
        # HTTP exchange), answered with an error that names it.
        return self.failures.reply(conn.label, req.id, req.method, exc)

    def _finish(self, rid: rpc.Id, ctx: RequestContext | None, result: object) -> bytes:
        if ctx is not None and ctx.era == "modern":
            result = with_result_type(result)
        return rpc.encode_result(rid, result)

    def instructions(self, conn: Agent) -> str:
        """For ``conn``'s agent: of the servers its profile shows, as it may be told."""
        return instructions(
            self.servers,
            conn.profile,
            self.control.settings.result_budget_chars,
            own_user=conn.reads_shared_output(),
        )

    async def _tools_list(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> object:
        params = rpc.decode_as(req.params, mcp.ListParams)
        result = list_tools(
            self.servers, conn.profile, params, ctx, self.control.settings.page_size
        )
        pieces = in_pieces(req.id, result, ctx)
        if pieces is not None and await conn.send_long(req.id, pieces):
            return None
        return result

    async def _listen(self, conn: Agent, req: rpc.Request, ctx: RequestContext | None) -> object:
        await self.listens.listen(conn, req, ctx)
        return None
