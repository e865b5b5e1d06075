"""``AgentServer``, the MCP server agents reach: over mcpd's sockets, JSON lines, both eras.

Each request runs in its own task (a tools/call in none: its outcome is written from a
callback), so a slow tool never holds up the rest of its connection, and replies go
out in whatever order they finish. Bad input gets an error naming the problem; only a
peer that overflows the line limit or stops reading loses its connection, and nobody
else notices."""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import trio

from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import AgentSession

from .. import __version__
from ..config.tables.model import NamingConfig
from ..config.tables.profiles import ProfileConfig
from ..policy.deciders.departed import Departed
from ..servers.all_servers import AllServers
from .agent import Agent, Audience
from .answerer import Answerer
from .askback.driver import AskBackDriver
from .beyond_tools.extra_methods import ExtraMethods
from .calls.callpolicy import CallPolicy, QueuedCalls
from .calls.callrecords import CallRecords
from .calls.toolcall import Router
from .connection.agent_connection import Connection
from .connection.ending import Stops
from .connection.failures import Failures
from .daemon_seam import DaemonForAgents, Lines
from .entry.door import Door, refuse_connection
from .entry.places import Seat
from .entry.sockets import Leave, ProfileSockets
from .entry.unix_socket import UnixBound
from .news.listen import Listens
from .news.tool_news import ToolNews
from .own_methods.approval_methods import HANDLERS as APPROVAL_HANDLERS
from .own_methods.auth_methods import HANDLERS as AUTH_HANDLERS
from .own_methods.daemon_methods import HANDLERS as DAEMON_HANDLERS
from .own_methods.pins_methods import HANDLERS as PINS_HANDLERS
from .own_methods.profile_methods import PROFILE_METHODS, OwnMethod, ProfileMethods
from .profiles import Profile, Profiles
from .tasks.table import Tasks

if TYPE_CHECKING:
    from .http.http_side import HttpSide
    from .http.tcp import Connect, EndpointDoor

logger = logging.getLogger("mcpd.agents")

SERVER_INFO: Final = mcp.Implementation(name="mcpd", version=__version__, title="mcpd")
CAPABILITIES: Final[dict[str, Any]] = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "completions": {},
    "logging": {},
    "extensions": {features.TASKS_EXTENSION: {}},
}


def new_session() -> AgentSession:
    return AgentSession(SERVER_INFO, CAPABILITIES)


class AgentServer(ProfileMethods):
    """The sockets agents connect to, each agent met at them (a ``Connection``, or the
    HTTP side), and the parts that answer their requests (its ``answerer``): a tools/call
    by its ``Router``, prompts and resources by its ``extras``, mcpd's own methods by
    this (``ProfileMethods``)."""

    def __init__(
        self, servers: AllServers, control: DaemonForAgents, lines: Lines, *, splice: bool = True
    ) -> None:
        """``splice``: whether tools/call requests and replies may be written around
        the bytes they carry (``protocol.jsonrpc.splice``) rather than encoded."""
        self.servers = servers
        self.control = control
        self.lines = lines
        self.connections: set[Agent] = set()  # the socket's, and the listens over HTTP
        records = CallRecords(control.audit)
        self.failures = Failures()
        self.departed = Departed()
        self.askback = AskBackDriver(self.failures, lambda: control.settings)
        tasks = Tasks(
            servers, lambda: control.settings.result_budget_chars, lambda: control.settings
        )
        self.router = Router(
            servers,
            self.askback,
            tasks,
            CallPolicy(control.call_gate, self.askback.parks),
            records,
            budget=control.settings.result_budget_chars,
            splice=splice,
            max_line_bytes=lambda: control.settings.max_line_bytes,
            settings=lambda: control.settings,
        )
        # Prompts, resources, completions, tasks' methods, logs, list-change news.
        self.extras = ExtraMethods(
            servers,
            control,
            self._agents,
            records,
            self.askback,
            tasks,
            lambda conn: self.view(conn).view,
        )
        self.extras.look_at_updates(self.router.policy)
        self.listens = Listens(self.extras.open_listen, self.extras.close_listen)
        self.profiles = Profiles(servers)
        self.profiles.configure({}, NamingConfig(), control.settings.max_tools)
        self._queued = QueuedCalls(control.call_gate, self.profiles)
        self.sockets = ProfileSockets(self._handle, self._sessions_on)
        self.door = Door(
            lambda: control.settings,
            self.sockets.allowed,
            control.server_of,
            self.profiles.granting,
        )
        self.endpoint: Connect | None = None  # where the HTTP endpoint listens
        self._http: HttpSide | None = None
        own: dict[str, OwnMethod[ProfileMethods]] = {
            **DAEMON_HANDLERS,
            **AUTH_HANDLERS,
            **PINS_HANDLERS,
            **APPROVAL_HANDLERS,
            **PROFILE_METHODS,
        }
        self.answerer = Answerer(
            servers,
            control,
            self.router,
            self.failures,
            self.extras,
            self.listens,
            {method: functools.partial(handler, self) for method, handler in own.items()},
        )
        self.tool_news = ToolNews(self._agents, self.view)
        servers.subscribe(self.tool_news.changed)

    @property
    def http(self) -> HttpSide:
        """The HTTP side, made for the first HTTP request (on a socket or the endpoint)."""
        if self._http is None:
            # Here, not at the top: a daemon that no HTTP client talks to does without
            # h11 and the HTTP routes.
            from .http.http_side import HttpSide

            self._http = HttpSide(
                self.answerer,
                self.servers,
                self.control,
                self.connections,
                self.listens.end_of,
                new_session,
                self.profiles,
                self.agents_kin,
                self.departed.left,
            )
        return self._http

    def configure(self, profiles: Mapping[str, ProfileConfig], naming: NamingConfig) -> None:
        """The config's profiles, at start and after a reload; the agents of a profile
        that changed hear of it (and no one else)."""
        changed = self.profiles.configure(profiles, naming, self.control.settings.max_tools)
        self.extras.subscriptions.reconfigured(self.profiles.views(changed))
        self.router.budget = self.control.settings.result_budget_chars
        self.tool_news.changed()
        self.extras.list_changed()

    def look_again(self, alias: str | None = None) -> None:
        """The calls waiting for a slot at ``alias`` (None: at any server), as the
        rules, profiles and tools are now: those no longer let through end unsent."""
        self.servers.look_again(self._queued, alias)

    # -- serving --

    async def serve(
        self,
        listener: trio.abc.Listener[trio.SocketStream],
        profile_sockets: Mapping[str, UnixBound],
        endpoint: list[socket.socket],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve agents on what ``mcpd.starting.listening`` bound before any server started."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.tool_news.run)
            await nursery.start(self.askback.run)
            nursery.start_soon(self.extras.run)
            # The daemon's own socket last: once it answers, status shows every endpoint.
            await nursery.start(self.sockets.run, self.profiles.configs(), profile_sockets)
            listen = self.control.settings.http_listen
            if listen is not None:
                # Here, not at the top: only a daemon with [daemon] http_listen loads the
                # TCP side.
                from .http.tcp import serve_endpoint

                self.endpoint = await nursery.start(
                    serve_endpoint, listen, endpoint, self.control, self._endpoint_connection
                )
            await nursery.start(trio.serve_listeners, self._handle, [listener])
            task_status.started()

    async def apply_sockets(self) -> None:
        """Bind, close or rebind the profiles' sockets after a reload; the connections
        of a removed profile get the grace a removed server's calls get to finish."""
        grace = self.control.settings.call_timeout
        await self.sockets.apply(self.profiles.configs(), grace=grace)

    def _sessions_on(self, profile: str) -> Callable[[], int]:
        """What ends the HTTP sessions opened on ``profile``'s socket until now (none
        where no HTTP client came)."""
        return (lambda: 0) if self._http is None else self._http.mcp.opened_on(profile)

    async def _endpoint_connection(self, stream: trio.SocketStream, gate: EndpointDoor) -> None:
        await self.http.connection(stream, None, gate=gate)

    async def _handle(
        self, stream: trio.SocketStream, profile: str | None = None, leave: Leave | None = None
    ) -> None:
        """``leave``: on a profile's socket, what asks the connection to end."""
        seat = await self.door.check(stream, profile)
        if seat is None:
            return
        with seat:
            await self._serve_seated(stream, seat.profile, seat, leave)

    async def _serve_seated(
        self, stream: trio.SocketStream, profile: str | None, seat: Seat, leave: Leave | None
    ) -> None:
        chosen = self.profiles.default if profile is None else self.profiles.get(profile)
        if chosen is None:
            await refuse_connection(stream, f"mcpd: the profile {profile!r} was removed")
            return
        spoken = await self.door.speaks(stream, seat)
        if spoken is None:  # said nothing, or nothing in time
            await stream.aclose()
            return
        if spoken == "http":  # curl, a browser, a monitor, an HTTP client
            await self.http.connection(stream, seat.peer, fixed=profile, leave=leave)
            return
        conn = Connection(
            self.answerer,
            stream,
            new_session(),
            self.lines,
            self.control.settings,
            version=chosen.version,
            line_hold=self.door.unfinished.hold(seat.peer, profile),
            peer=seat.peer,
            profile=chosen,
            fixed_profile=profile,
        )
        self.connections.add(conn)
        self.extras.joined(conn)
        conn.gone_hooks.append(lambda: self.extras.left(conn.owner))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.door.expect_request, conn, seat)
                if leave is not None:
                    leave.winds_down = True
                    nursery.start_soon(self._leave_when_asked, conn, leave)
                await conn.run()
                nursery.cancel_scope.cancel()
        finally:
            self.connections.discard(conn)
            if conn.spoke_mcp:
                with trio.CancelScope(shield=True):
                    self.departed.left(await conn.kin())
            self.extras.left(conn.owner)
            self.control.approvals.remembered.forget(conn.identity.connection)
            with trio.move_on_after(1, shield=True):
                await stream.aclose()

    async def _leave_when_asked(self, conn: Connection, leave: Leave) -> None:
        """Once its profile is removed: what the agent has in flight is answered (its
        subscriptions end as they do when the daemon stops), then it is let go."""
        await leave.asked.wait()
        self.listens.end_of(conn)
        await conn.leave(leave.reason, leave.grace)

    def _agents(self) -> list[Audience]:
        """Who hears of list changes: the socket's connections (and listens over HTTP),
        and the legacy HTTP sessions, whose GET streams carry the news."""
        agents: list[Audience] = list(self.connections)
        if self._http is not None:
            agents += [s.news for s in self._http.sessions.values()]
        return agents

    def view(self, conn: Audience) -> Profile:
        """The profile ``conn``'s agent sees."""
        return conn.profile

    def in_flight(self) -> list[Stops]:
        """What holds requests in flight: the sockets' connections, and ``/mcp``."""
        return [*self.connections, *([] if self._http is None else [self._http.mcp.answering])]

    async def end_subscriptions(self) -> None:
        await self.listens.end_all()
