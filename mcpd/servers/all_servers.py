"""Every configured server seen as one, for the agent side.

The agent side never holds a server's parts: it starts calls by alias, reads the servers'
states, and subscribes to changes through this one door. A profile is not another
door: what it lets its agents see of the servers is a filter on their aliases
(``only``) handed to what reads them here; its tools are its view of the table
(``view_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp.server_logs import LogMessage

from ..registry.naming.spelling import alias_prefix
from ..registry.profiles.views import ProfileView
from ..registry.tables.catalog import Catalog
from ..registry.tables.prompts import PromptEntry
from ..registry.uris.claims import Budget
from ..registry.uris.resources import Hold
from ..registry.uris.scheme import Ambiguous, Routed, Sight, Undecided
from ..server_row import ServerState
from .asking import requests
from .asking.askback import Asker
from .calling.calls import Call, CallRefused, QueuedCheck, SessionMark, Whose
from .connected.log_messages import Heard
from .life.server_parts import ServerParts
from .lists.prompt_resource_lists import TaskNews, Updated
from .status.outage import Outage, iso_of_monotonic
from .status.state import Said, short_lists
from .supervisor import Supervisor

Keep = Callable[[str, str], bool]  # (alias, name or URI): whether an agent sees it


class AllServers:
    def __init__(self, supervisor: Supervisor, catalog: Catalog) -> None:
        self._supervisor = supervisor
        self._catalog = catalog
        self._listeners: list[Callable[[], None]] = []
        # Every resource subscription agents hold, by (alias, the server's URI): a
        # runner started again (a reload, say) gets them back.
        self._subscriptions: dict[tuple[str, str], int] = {}
        self._on_updated: list[Updated] = []
        self._on_task: list[TaskNews] = []
        self._on_session_end: list[Callable[[str, SessionMark], None]] = []
        self._on_log: list[Heard] = []
        self._log_level: Callable[[str], str | None] = lambda alias: None

    def refresh(self) -> None:
        """An agent is listing: refresh any server's list that went stale."""
        for server in self._supervisor.servers.values():
            server.tool_list.maybe_refresh()

    def start(self, call: Call) -> None:
        """Hand a routed call (``call.alias`` its server) to its server's scheduler."""
        server = self._supervisor.servers.get(call.alias)
        if server is None:
            outage = Outage(call.alias, "stopped", self._supervisor.absent(call.alias))
            call.caller.finish(outage)
            return
        server.scheduler.start(call)

    def look_again(self, check: QueuedCheck, alias: str | None = None) -> None:
        """The calls waiting for a slot at ``alias`` (None: at every server) put to
        ``check``: those it refuses end unsent."""
        servers = self._supervisor.servers
        if alias is None:
            for server in list(servers.values()):
                server.scheduler.look_again(check)
        elif alias in servers:
            servers[alias].scheduler.look_again(check)

    def states(self, only: Callable[[str], bool] | None = None) -> list[ServerState]:
        """Per server (whose alias ``only`` admits): its state, whether it is available,
        and the outage if not."""
        out = []
        for alias in sorted(self._supervisor.servers):
            if only is not None and not only(alias):
                continue
            server = self._supervisor.servers[alias]
            state = ServerState(server=alias, state=server.state, available=server.available)
            if not state.available:
                o = server.outage()
                state.reason = o.reason
                state.since = iso_of_monotonic(o.since)
                state.retry_at = iso_of_monotonic(o.retry_at)
            out.append(state)
        return out

    def outages(
        self, only: Callable[[str], bool] | None = None, *, own_user: bool = False
    ) -> list[str]:
        """One sentence per unavailable server (whose alias ``only`` admits), as an
        agent of the daemon's own user or root (``own_user``) or any other is told it
        (``Outage.for_agent``)."""
        return self._supervisor.outages(only, own_user=own_user)

    def instructions(self, only: Callable[[str], bool] | None = None) -> list[Said]:
        """What each server (whose alias ``only`` admits) said of itself when mcpd
        connected to it, cleaned, with mcpd's note on it, in alias order."""
        out = []
        for alias, server in sorted(self._supervisor.servers.items()):
            # What the server said of itself for models when mcpd last connected.
            up = server.upstream
            if up is None or (only is not None and not only(alias)):
                continue
            said = self._catalog.gate.instructions(alias, up.instructions) or ""
            note = short_lists(server.tool_list.short, server.prompt_resources.trimmed)
            if note or said.strip():
                out.append(Said(alias, note, said.strip()))
        return out

    def down_for(
        self,
        name: str,
        only: Callable[[str], bool] | None = None,
        template: str | None = None,
        *,
        own_user: bool = False,
    ) -> str | None:
        """What to say of the unavailable (or disabled) server (whose alias ``only``
        admits) whose tools' names ``name`` has the prefix of (under ``template``, by
        default the table's), if any, as ``outages`` tells it: a server that never listed
        its tools has none to call, and "unknown tool" hid why."""
        template = template or self._catalog.naming.template
        servers = self._supervisor.servers
        found: tuple[int, str] | None = None
        for alias, cfg in self._supervisor.config.servers.items():
            server = servers.get(alias)
            if (server is not None and server.available) or (only is not None and not only(alias)):
                continue
            if server is None and cfg.enabled:
                continue  # being added by a reload: not down
            prefix = alias_prefix(template, alias)
            if prefix and name.startswith(prefix) and (found is None or len(prefix) > found[0]):
                found = (len(prefix), alias)  # the longest: alias "a" is a prefix of "a_b"
        if found is None:
            return None
        server = servers.get(found[1])
        if server is None:  # enabled = false: it is not run, and has no tools to list
            return (
                f"The tool server '{found[1]}' is disabled in mcpd's config (enabled = "
                "false); its tools are listed once it is enabled."
            )
        said = server.outage().for_agent(own_user).sentence()
        return f"{said} Its tools are listed again when it is back."

    def view_of(self, name: str) -> ProfileView:
        """A new view of the tools for the profile ``name`` (configured by the caller)."""
        return ProfileView(name, self._catalog)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` whenever the tools, their availability or a state change."""
        self._listeners.append(on_change)

    def changed(self) -> None:
        """Something agents see changed (called by the wiring on a server's change)."""
        for server in self._supervisor.servers.values():
            self._hook(server)
        for listener in self._listeners:
            listener()

    # -- prompts, resources, completions, tasks --

    @property
    def prompt_resource_versions(self) -> tuple[int, int]:
        c = self._catalog
        return (c.prompts.version, c.resources.version)

    def prompt_listing(self, keep: Keep | None = None) -> list[Raw]:
        return self._catalog.prompts.listing(keep)

    def lookup_prompt(self, name: str) -> PromptEntry | None:
        return self._catalog.prompts.lookup(name)

    def resource_listing(self, sight: Sight | None = None) -> list[Raw]:
        return self._catalog.resources.listing(sight)

    def template_listing(self, sight: Sight | None = None) -> list[Raw]:
        return self._catalog.resources.template_listing(sight)

    def route_uri(
        self, uri: str, budget: Budget, sight: Sight | None = None
    ) -> Routed | Ambiguous | Undecided | None:
        return self._catalog.resources.routes.route(uri, budget, sight)

    def links(self, alias: str, sight: Sight | None = None) -> Callable[[str], str]:
        return self._catalog.resources.routes.links(alias, sight)

    def route_template(
        self, template: str, sight: Sight | None = None
    ) -> tuple[str, str] | Ambiguous | None:
        return self._catalog.resources.routes.template_route(template, sight)

    def held_whole(self, alias: str) -> str | None:
        return self._catalog.gate.held_whole(alias)

    def held_uri(self, alias: str, uri: str, budget: Budget) -> Hold | None:
        return self._catalog.resources.held_for(alias, uri, budget)

    def held_template(self, alias: str, template: str) -> str | None:
        return self._catalog.resources.held_template(alias, template)

    async def request(
        self,
        alias: str,
        method: str,
        params: msgspec.Struct,
        *,
        name: str | None = None,
        capabilities: Mapping[str, rpc.Json] | None = None,
        asker: Asker | None = None,
        whose: Whose | None = None,
        session: SessionMark | None = None,
    ) -> Raw:
        """One request to a server for an agent (``whose``: the agent's, whose bytes it
        is weighed against; None: mcpd's own), in the session ``session`` only if given;
        raises CallRefused or rpc.RPCError."""
        server = self._supervisor.servers.get(alias)
        if server is None:
            raise CallRefused(Outage(alias, "stopped", self._supervisor.absent(alias)))
        return await requests.send(
            server,
            method,
            params,
            name=name,
            capabilities=capabilities,
            asker=asker,
            whose=whose,
            session=session,
        )

    def session_of(self, alias: str) -> SessionMark | None:
        """The mark of the session in force with ``alias`` (None: none is)."""
        server = self._supervisor.servers.get(alias)
        up = server.upstream if server is not None else None
        return up.mark if up is not None else None

    def written(self, alias: str, value: object, what: str) -> Raw:
        """``value``, made of what ``alias`` sent (decoded, and perhaps changed), as an
        agent gets it: written, and searched as written for every secret mcpd holds
        (``SecretGuard.written``)."""
        return Raw(self._supervisor.guard.written(alias, value, what))

    def subscribable(self, alias: str) -> bool:
        server = self._supervisor.servers.get(alias)
        return server is not None and server.prompt_resources.supports_subscriptions(
            server.upstream
        )

    def subscribe_resource(self, alias: str, uri: str, on: bool) -> None:
        """Hold (or let go of) one agent's subscription to a server's URI."""
        server = self._supervisor.servers.get(alias)
        if server is not None:
            # Before the count changes: a runner hooked now gets the subscriptions held
            # so far, and this one below, once.
            self._hook(server)
        key = (alias, uri)
        count = self._subscriptions.get(key, 0) + (1 if on else -1)
        if count > 0:
            self._subscriptions[key] = count
        else:
            self._subscriptions.pop(key, None)
        if server is not None:
            if on:
                server.prompt_resources.add_subscription(uri)
            else:
                server.prompt_resources.drop_subscription(uri)

    def watch_task(self, alias: str, task_id: str, on: bool) -> None:
        server = self._supervisor.servers.get(alias)
        if server is not None:
            self._hook(server)
            server.prompt_resources.watch_task(task_id, on)

    def on_resource_updated(self, listener: Updated) -> None:
        self._on_updated.append(listener)

    def on_task_news(self, listener: TaskNews) -> None:
        self._on_task.append(listener)

    def on_session_end(self, listener: Callable[[str, SessionMark], None]) -> None:
        """``listener(alias, mark)`` as each session with a server ends."""
        self._on_session_end.append(listener)

    def want_logs(self, level_for: Callable[[str], str | None]) -> None:
        """``level_for(alias)``: the most verbose level agents want of that server now."""
        self._log_level = level_for
        for server in self._supervisor.servers.values():
            self._hook(server)
            server.logs.want(level_for(server.alias))

    def on_log_message(self, listener: Heard) -> None:
        self._on_log.append(listener)

    def _hook(self, server: ServerParts) -> None:
        if server.logs.on_message is None:
            server.logs.on_message = self._log_heard
            server.logs.want(self._log_level(server.alias))
        server.on_session_end = self._session_ended
        if server.prompt_resources.on_updated is not None:
            return
        server.prompt_resources.on_updated = self._updated
        server.prompt_resources.on_task = self._task
        for (alias, uri), count in self._subscriptions.items():
            if alias == server.alias and uri not in server.prompt_resources.subscribed:
                for _ in range(count):
                    server.prompt_resources.add_subscription(uri)

    def _updated(self, alias: str, uri: str) -> None:
        for listener in self._on_updated:
            listener(alias, uri)

    def _log_heard(self, alias: str, message: LogMessage) -> None:
        for listener in self._on_log:
            listener(alias, message)

    def _task(self, alias: str, params: Raw) -> None:
        for listener in self._on_task:
            listener(alias, params)

    def _session_ended(self, alias: str, mark: SessionMark) -> None:
        for listener in self._on_session_end:
            listener(alias, mark)
