"""What the daemon says of itself: the status document (``mcpd status``, the status
page, ``mcpd/status``), the servers' recent history and the Prometheus text, either
whole, for those who may read all of it, or as an agent of one profile reads it.

A server's row shows its last lines on stderr (where a server that several agents share
writes what any of them sent it), its pid and its home in the state directory to the
daemon's own user and root alone: anyone else reads it without them, in every
profile."""

from __future__ import annotations

import os

import msgspec
import trio

from protocol.shown.server_urls import display_url
from transports.stdio.sandbox import anchors

from . import __version__
from .agents.agent_server import AgentServer
from .local.state.unsaved import SaveWatch
from .oversight import Oversight
from .registry.profiles.views import ProfileView
from .registry.tables.catalog import Catalog
from .registry.tables.curation import ToolBudget
from .registry.tables.unlisted import UnlistedNames
from .reloading.outcome import ReloadOutcome
from .server_row import ServerRow
from .servers.all_servers import AllServers
from .servers.status import metrics
from .servers.status.history import Histories, ServerHistory
from .servers.status.row import others_row
from .servers.supervisor import Supervisor
from .status_document import DaemonStatus, StatusDocument


class StatusReport:
    def __init__(
        self,
        supervisor: Supervisor,
        catalog: Catalog,
        all_servers: AllServers,
        agent_server: AgentServer,
        oversight: Oversight,
        histories: Histories,
        tool_budget: ToolBudget,
        state_file: str,
        saving: list[SaveWatch],
    ) -> None:
        """``saving``: the state files whose writes may fail."""
        self._supervisor = supervisor
        self._catalog = catalog
        self._all_servers = all_servers
        self._agent_server = agent_server
        self._oversight = oversight
        self._histories = histories
        self._tool_budget = tool_budget
        # Whether the configuration that runs is the file's, and what of a server's
        # own settings names nothing it lists: known here, said by what reports.
        self.reloads = ReloadOutcome()
        self.unlisted = UnlistedNames(catalog, lambda alias: supervisor.config.servers.get(alias))
        self._state_file = state_file
        self._saving = saving

    def whole(self, *, socket: str, config: str | None, started: float) -> StatusDocument:
        """Everything, for those the daemon's own paths and pid may be shown to.
        ``started`` is the trio time the daemon started at."""
        servers = self._servers()
        catalog = self._catalog
        endpoint = self._agent_server.endpoint
        daemon = DaemonStatus(
            version=__version__,
            pid=os.getpid(),
            socket=socket,
            config=config,
            uptime_s=round(trio.current_time() - started, 1),
            connections=len(self._agent_server.agent_connections()),
            tools=catalog.size(),
            prompts=len(catalog.prompts.listing()),
            resources=len(catalog.resources.listing()),
            max_tools=self._tool_budget.limit,
            summary=self._supervisor.summary(),
            state_file=self._state_file,
            unsaved=[w.unsaved for w in self._saving if w.unsaved is not None],
            reload_refused=self.reloads.refusal(),
            warnings=[
                *[w for w in [self.reloads.warning()] if w],
                *[w for w in [self._tool_budget.warning(catalog.size())] if w],
                # Hidden paths moved since they were first hidden (``anchors``).
                *anchors.notices(),
            ],
            held=sum(s.held for s in servers),
            definition_changes=sum(s.definition_changes for s in servers),
            findings=sum(s.findings for s in servers),
            http=None if endpoint is None else display_url(endpoint.url),
        )
        return StatusDocument(
            daemon=daemon,
            servers=servers,
            profiles=self._agent_server.profile_status(bool(self._tool_budget.over)),
            approvals=self._oversight.approvals_waiting(),
            audit=self._oversight.audit_status(),
        )

    def of_profile(self, scope: ProfileView, *, started: float, own_user: bool) -> StatusDocument:
        """Status as an agent of the profile ``scope`` reads it: its own servers and
        profile, and of the daemon what says how it serves them (no paths, no pid, no
        other server named in the summary). ``own_user``: the agent is the daemon's
        own user or root, who read each server's row whole."""
        servers = self._servers(scope)
        if not own_user:
            servers = [others_row(s) for s in servers]
        over = bool(self._tool_budget.over)
        daemon = DaemonStatus(
            version=__version__,
            profile=scope.name,
            uptime_s=round(trio.current_time() - started, 1),
            connections=self._agent_server.agents()[scope.name],
            tools=scope.count(),
            prompts=len(self._all_servers.prompt_listing(scope.admits_prompt)),
            resources=len(self._all_servers.resource_listing(scope)),
            max_tools=scope.cap,
            summary=self._supervisor.summary(scope.has_server),
            warnings=[],
        )
        return StatusDocument(
            daemon=daemon,
            servers=servers,
            profiles=self._agent_server.profile_status(over, only=scope.name),
        )

    def metrics(self, scope: ProfileView | None = None) -> str:
        servers = self._supervisor.servers
        catalog = self._catalog
        if scope is None:
            agents = len(self._agent_server.agent_connections())
            text = metrics.render_server_metrics(servers, catalog, catalog.size(), agents)
            return text + self._oversight.metrics()
        own = {alias: r for alias, r in servers.items() if scope.has_server(alias)}
        text = metrics.render_server_metrics(
            own, catalog, scope.count(), self._agent_server.agents()[scope.name]
        )
        return text + self._oversight.metrics(scope.has_server)

    def history(self, scope: ProfileView | None = None) -> list[ServerHistory]:
        only = None if scope is None else scope.has_server
        return self._histories.view(self._supervisor.servers, only)

    def _servers(self, scope: ProfileView | None = None) -> list[ServerRow]:
        """Each server's row (of those ``scope`` has)."""
        rows = self._supervisor.status(None if scope is None else scope.has_server)
        if scope is not None:
            return rows
        # What the server's own settings name that it does not list: the operator's.
        return [msgspec.structs.replace(row, warnings=self.unlisted.of(row.alias)) for row in rows]
