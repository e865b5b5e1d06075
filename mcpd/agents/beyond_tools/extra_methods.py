"""Everything agents get beyond tools/list: methods, list-change news, what listens honour.

``ExtraMethods`` holds the per-daemon parts of these methods (task watches, resource
subscriptions, agents' log levels), is handed the ask-back driver and the tasks the
daemon's tools/call shares, and hands ``answerer.Answerer`` its handlers. It also sends
``notifications/{prompts,resources}/list_changed``: unsolicited to legacy agents,
tagged on the listens of modern agents that asked for them, and only when what the
agent's own profile lists of them changed (``ProfileView.offered``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Final, TypeAlias, TypeVar

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features, server_logs
from protocol.mcp.serving import RequestContext

from ...registry.profiles.views import ProfileView
from ...registry.uris.scheme import Sight
from ...servers.all_servers import AllServers
from ...servers.shared import AgentKey
from ..agent import Agent, Audience
from ..askback.driver import AgentSide, AskBackDriver
from ..calls.callpolicy import CallPolicy
from ..calls.callrecords import CallRecords, Seen, ended, reason_kept
from ..daemon_seam import DaemonForAgents
from ..news.logs import AgentLogs, SeesServer
from ..news.subscriptions import Subscriptions
from ..tasks.methods import TaskMethods
from ..tasks.table import Tasks
from ..tasks.watches import TaskWatches
from .allowance import Allowance
from .completions import complete
from .prompts import PromptsPage, Sees, everything, get_prompt, list_prompts
from .resources import ResourcesPage, list_resources, read_resource

_DEBOUNCE: Final = 0.2
_T = TypeVar("_T")
# One of these methods, as the server of agents' requests calls it with the agent and the
# request: its result is what the reply encodes, or its bytes (as ``OwnMethod``'s do).
ExtraMethod: TypeAlias = Callable[[Agent, rpc.Request, RequestContext | None], Awaitable[object]]


def _agent_side(conn: Agent, ctx: RequestContext | None) -> AgentSide:
    return AgentSide(
        owner=conn.owner,
        modern=ctx is not None and ctx.era == "modern",
        capabilities=ctx.capabilities if ctx is not None else None,
        requests=conn.asks,
        send=conn.offer,
        own_user=conn.reads_shared_output(),
        whose=conn.whose(),
    )


class ExtraMethods:
    def __init__(
        self,
        servers: AllServers,
        control: DaemonForAgents,
        connections: Callable[[], Iterable[Audience]],
        records: CallRecords,
        askback: AskBackDriver,
        tasks: Tasks,
        view_of: Callable[[Audience], ProfileView] | None = None,
    ) -> None:
        """``askback`` and ``tasks`` are the daemon's, shared with its tools/call
        (``calls.toolcall.Router``): a prompt or a read may be asked back as a call is,
        and a task a call handed over is got, updated and watched here."""
        self.servers = servers
        self.control = control
        self.records = records  # each get, read and completion's audit record
        # The agent's profile: which prompts and resources it sees.
        self._view_of = view_of
        self._connections = connections
        self.askback = askback
        self.tasks = tasks
        self.task_watches = TaskWatches(self.tasks, servers)
        self.task_methods = TaskMethods(self.tasks)
        self.subscriptions = Subscriptions(servers, lambda: control.settings)
        self.logs = AgentLogs(servers)
        # (connection, listen id) -> (which list changes it wants, its sender)
        self._listens: dict[tuple[int, rpc.Id], tuple[set[str], Callable[[bytes], None]]] = {}
        # What each agent may spend matching URIs, by its owner.
        self._allowances: dict[AgentKey, Allowance] = {}
        self._dirty = trio.Event()
        servers.subscribe(self.list_changed)

    def handlers(self) -> dict[str, ExtraMethod]:
        return {
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
            "tasks/get": self._task,
            "tasks/update": self._task,
            "tasks/cancel": self._task,
        }

    async def run(self) -> None:
        """Tell agents of list changes, as they come."""
        await self._broadcast()

    def list_changed(self) -> None:
        """What some agent is listed may have changed: each hears of it if its own
        profile's lists did (the event is replaced each time the broadcaster wakes)."""
        self._dirty.set()

    # -- agents coming and going --

    def joined(self, conn: Audience) -> None:
        """Only what changes in the agent's profile from now on is news to it."""
        conn.seen_offered = self._offered(conn)

    def _offered(self, conn: Audience) -> tuple[int, int]:
        if self._view_of is None:
            return self.servers.prompt_resource_versions
        return self._view_of(conn).offered()

    def switched(self, conn: Agent) -> None:
        """The agent picked another profile: its subscriptions route through it."""
        sight = self._sees(conn)[1]
        for owner in {id(o): o for o in (conn.listen_owner, conn.owner)}.values():
            self.subscriptions.switched(owner, sight)

    def left(self, owner: AgentKey) -> None:
        """The agent disconnected: servers waiting for its answers get an error now."""
        self.askback.owner_gone(owner, "the agent disconnected")
        self.subscriptions.owner_gone(owner)
        self.logs.owner_gone(owner)
        self.tasks.owner_gone(owner)
        self._allowances.pop(owner, None)

    def _allowance(self, owner: AgentKey) -> Allowance:
        found = self._allowances.get(owner)
        if found is None:
            found = self._allowances[owner] = Allowance()
        return found

    # -- tasks --

    def look_at_updates(self, policy: CallPolicy) -> None:
        """Have ``policy`` look at each task's answers before they reach its server."""
        self.task_methods.look_at_updates(policy, self.records)

    # -- methods --

    def _page_size(self) -> int:
        return self.control.settings.page_size

    def _sees(self, conn: Agent) -> tuple[Sees, Sight | None]:
        """What the agent's profile admits: (prompts, resources)."""
        if self._view_of is None:
            return everything, None
        view = self._view_of(conn)
        return view.admits_prompt, view

    async def _prompts_list(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> PromptsPage:
        params = rpc.decode_as(req.params, mcp.ListParams)
        return list_prompts(self.servers, params, ctx, self._page_size(), self._sees(conn)[0])

    async def _recorded(
        self,
        conn: Agent,
        req: rpc.Request,
        ctx: RequestContext | None,
        answer: Callable[[Seen, int], Awaitable[_T]],
    ) -> _T:
        """``answer``'s reply, given the result budget now, and the request's audit
        record, which names the profile it was routed in (the connection may switch
        before it ends)."""
        arrived = self.records.now()
        view_of = self._view_of
        profile = view_of(conn).name if view_of is not None else "default"
        seen = Seen()
        size = 0
        try:
            result = await answer(seen, self.control.settings.result_budget_chars)
            word, reason = seen.words()
            size = len(result) if isinstance(result, bytes | Raw) else 0
            return result
        except rpc.RPCError as exc:
            word, reason = seen.words(exc)
            raise
        except rpc.InvalidParams as exc:
            word, reason = "error", reason_kept(f"Invalid params: {exc}")
            raise
        except BaseException as exc:
            word, reason = ended(exc)
            raise
        finally:
            agent = conn.identity.info(profile, ctx is not None and ctx.era == "modern")
            arguments, target = seen.arguments, seen.target
            sent = target is not None and word != "refused"  # not held, nor refused before
            self.records.request(
                arrived, agent, req.method, seen.name, target, word, reason, size, arguments, sent
            )

    async def _prompts_get(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> bytes:
        agent = _agent_side(conn, ctx)
        sees, sight = self._sees(conn)

        def answer(seen: Seen, budget: int) -> Awaitable[bytes]:
            return get_prompt(self.servers, self.askback, agent, req, budget, sees, sight, seen)

        return await self._recorded(conn, req, ctx, answer)

    async def _resources_list(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> ResourcesPage:
        params = rpc.decode_as(req.params, mcp.ListParams)
        sees = self._sees(conn)[1]
        return list_resources(self.servers, params, ctx, self._page_size(), False, sees)

    async def _templates_list(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> ResourcesPage:
        params = rpc.decode_as(req.params, mcp.ListParams)
        sees = self._sees(conn)[1]
        return list_resources(self.servers, params, ctx, self._page_size(), True, sees)

    async def _resources_read(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> bytes:
        agent = _agent_side(conn, ctx)
        allowance = self._allowance(agent.owner)
        sees = self._sees(conn)[1]
        servers, askback = self.servers, self.askback

        def answer(seen: Seen, budget: int) -> Awaitable[bytes]:
            return read_resource(servers, askback, agent, req, budget, allowance, sees, seen)

        return await self._recorded(conn, req, ctx, answer)

    async def _subscribe(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> dict[str, object]:
        return await self._legacy_subscription(conn, req, ctx, True)

    async def _unsubscribe(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> dict[str, object]:
        return await self._legacy_subscription(conn, req, ctx, False)

    async def _legacy_subscription(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None, on: bool
    ) -> dict[str, object]:
        if ctx is not None and ctx.era == "modern":
            raise rpc.RPCError(
                rpc.METHOD_NOT_FOUND,
                f"{req.method} belongs to the handshake protocol; use subscriptions/listen",
            )
        uri = rpc.decode_as(req.params, features.SubscribeParams).uri
        owner, sees, whose = _agent_side(conn, ctx).owner, self._sees(conn)[1], conn.whose()
        allowance = self._allowance(owner)
        steps = await allowance.take()
        try:
            self.subscriptions.subscribe(owner, uri, conn.news_sender(), on, steps, sees, whose)
        finally:
            allowance.give_back(steps)
        return {}

    async def _set_level(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> dict[str, object]:
        if ctx is not None and ctx.era == "modern":
            raise rpc.RPCError(
                rpc.METHOD_NOT_FOUND,
                f"logging/setLevel belongs to the handshake protocol; put {mcp.KEY_LOG_LEVEL!r}"
                " in a request's _meta",
            )
        level, sees = server_logs.checked_level(req.params), self._sees_server(conn)
        own_user = conn.reads_shared_output()
        self.logs.set_level(conn.owner, level, conn.news_sender(), sees, own_user=own_user)
        return {}

    def _sees_server(self, conn: Agent) -> SeesServer:
        """Whether the agent's profile shows a server (asked anew each time: a reload
        may change the profile)."""
        view_of = self._view_of
        if view_of is None:
            return lambda alias: True
        return lambda alias: view_of(conn).has_server(alias)

    async def _complete(self, conn: Agent, req: rpc.Request, ctx: RequestContext | None) -> Raw:
        prompts, resources = self._sees(conn)
        own_user = conn.reads_shared_output()

        def answer(seen: Seen, budget: int) -> Awaitable[Raw]:
            return complete(
                self.servers,
                req,
                ctx,
                prompts,
                resources,
                seen,
                own_user=own_user,
                whose=conn.whose(),
                budget=budget,
            )

        return await self._recorded(conn, req, ctx, answer)

    async def _task(self, conn: Agent, req: rpc.Request, ctx: RequestContext | None) -> object:
        owner = _agent_side(conn, ctx).owner
        return await self.task_methods.answer(conn, req, ctx, owner, self._sees(conn)[1])

    # -- subscriptions/listen --

    def open_listen(
        self, conn: Agent, listen_id: rpc.Id, wanted: rpc.JsonObject, ctx: RequestContext | None
    ) -> dict[str, object]:
        """What mcpd honours of a listen besides tool-list changes."""
        if conn.seen_offered is None:
            self.joined(conn)  # only changes from now on are news to it
        honoured: dict[str, object] = {}
        flags = {k for k in ("promptsListChanged", "resourcesListChanged") if wanted.get(k)}
        for flag in flags:
            honoured[flag] = True
        where = (id(conn), listen_id)
        self._listens[where] = (flags, conn.send_nowait)
        agent: AgentSide = _agent_side(conn, ctx)
        if "resourceSubscriptions" in wanted:
            uris = wanted.get("resourceSubscriptions")
            allowance = self._allowance(agent.owner)
            steps, sees, whose = allowance.now(), self._sees(conn)[1], conn.whose()
            try:
                honoured["resourceSubscriptions"] = self.subscriptions.listen(
                    conn.listen_owner, listen_id, uris, conn.send_nowait, steps, sees, whose
                )
            finally:
                allowance.give_back(steps)
        if "taskIds" in wanted:
            if ctx is None or not features.has_tasks(ctx.capabilities):
                raise rpc.RPCError(
                    rpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "taskIds need the tasks extension",
                    {"requiredCapabilities": {"extensions": {features.TASKS_EXTENSION: {}}}},
                )
            honoured["taskIds"] = self.task_watches.watch(
                agent.owner,
                where,
                wanted.get("taskIds"),
                conn.send_nowait,
                ctx.capabilities,
                lambda: self._sees(conn)[1],
            )
        return honoured

    def close_listen(self, conn: Agent, listen_id: rpc.Id) -> None:
        where = (id(conn), listen_id)
        self._listens.pop(where, None)
        self.subscriptions.unlisten(conn.listen_owner, listen_id)
        self.task_watches.unwatch(where)

    # -- list-change news --

    async def _broadcast(self) -> None:
        while True:
            await self._dirty.wait()
            await trio.sleep(_DEBOUNCE)
            self._dirty = trio.Event()
            self._tell()

    def _tell(self) -> None:
        # A function of its own, so that the task keeps no connection while it waits:
        # one that has gone since would keep all it held (a line half read) alive.
        for conn in list(self._connections()):
            seen = conn.seen_offered
            conn.seen_offered = now = self._offered(conn)
            if seen is None or seen == now:
                continue
            news = []
            if now[0] != seen[0]:
                news.append(("notifications/prompts/list_changed", "promptsListChanged"))
            if now[1] != seen[1]:
                news.append(("notifications/resources/list_changed", "resourcesListChanged"))
            legacy = conn.session.legacy_version
            for method, flag in news:
                if legacy is not None:
                    conn.send_nowait(rpc.encode_notification(method))
                for (cid, listen_id), (flags, send) in self._listens.items():
                    if cid == id(conn) and flag in flags:
                        tag = {"_meta": {mcp.KEY_SUBSCRIPTION_ID: listen_id}}
                        send(rpc.encode_notification(method, tag))
