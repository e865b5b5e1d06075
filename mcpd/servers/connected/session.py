"""One session with a server, from its open transport to the session's end.

Connecting and listing come first, within ``list_timeout``; then the connected server
is tended (its health, its lists and subscriptions, its transport closing, a login it
wants) until one of those ends the session by raising. Each later request for its
lists, subscriptions and log level waits ``list_timeout`` at most too. What a session's start and
end mean for the server's state is the runner's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from protocol.jsonrpc import messages as rpc
from transports.base import Transport
from transports.errors import TransportError, single_exceptions

from ...config.tables.model import DaemonConfig, ListLimits
from ..asking.progress import ProgressRoutes
from ..calling.scheduler import CallScheduler
from ..life.backoff import RestartPolicy
from ..lists.prompt_resource_lists import PromptResourceKeeper
from ..lists.rediscovery import Rediscovery
from ..lists.tool_list_keeper import ToolListKeeper
from ..lists.tool_pages import ListResult
from ..oauth import LoginRequired
from ..results.taking_apart import ReplyWork
from .answer_wait import AnswerWait, RanOut
from .handshake import relay_capabilities
from .health import Health
from .log_messages import LogMessages
from .upstream import Upstream

if TYPE_CHECKING:
    from ..oauth import ServerAuth


_CAPABILITIES_KEPT: Final = (
    "the capabilities it declared before are relied on until it answers, and it is "
    "asked again before its next list is fetched"
)


class Session:
    """A runner's sessions, one at a time. ``wake`` is for whoever has news that the
    connected server's task should act on (a list changed, a breaker moved)."""

    def __init__(
        self,
        alias: str,
        *,
        era: str,
        relay: list[str],
        health: Health,
        policy: RestartPolicy,
        tool_list: ToolListKeeper,
        prompt_resources: PromptResourceKeeper,
        logs: LogMessages,
        progress: ProgressRoutes,
        scheduler: CallScheduler,
        auth: ServerAuth | None,
        replies: ReplyWork,
        answers: AnswerWait,
        rediscovery: Rediscovery,
    ) -> None:
        """``answers``: what bounds the keepers' requests once the server is served,
        the same one they were built with; ``rediscovery``: whether its version
        is to be asked again (a call refused for it says so)."""
        self.alias = alias
        self._answers = answers
        self._rediscovery = rediscovery
        self._replies = replies
        self.era_hint = era
        self._relay = relay
        self._health = health
        self._policy = policy
        self._tool_list = tool_list
        self._prompt_resources = prompt_resources
        self._logs = logs
        self._progress = progress
        self._scheduler = scheduler
        self._auth = auth
        self._wake = trio.Event()
        self._closed = False

    def wake(self) -> None:
        self._wake.set()

    def on_notification(self, msg: rpc.Notification) -> None:
        if msg.params is not None:
            # A log message, a progress message: relayed to agents (without what the
            # server put under mcpd's keys, every secret masked) and logged, unless it
            # is too big to make so (``taking_apart``). A task's news is a task as
            # tasks/get shows it, and made fit to pass on as that is.
            task = msg.method == "notifications/tasks"
            params = self._replies.notification(msg.params, msg.method, task=task)
            if params is None:
                return
            if params is not msg.params:
                msg = rpc.Notification(msg.method, params)
        if msg.method == "notifications/progress":
            self._progress.handle(msg)
        else:
            self._prompt_resources.on_notification(msg)
            self._tool_list.on_notification(msg)
            self._logs.on_notification(msg)

    async def open(
        self, transport: Transport, *, http: bool, settings: DaemonConfig, limits: ListLimits
    ) -> tuple[Upstream, ListResult]:
        """Connect and list tools, prompts and resources, each up to ``limits``."""
        up = Upstream(
            self.alias,
            transport,
            http=http,
            era=self.era_hint,
            probe_timeout=settings.probe_timeout,
            renew_timeout=settings.list_timeout,
            max_pages=settings.max_pages,
            limits=limits,
            guard=self._replies.guard,
            replies=self._replies,
            answered=self._scheduler.answered,
        )
        up.client_capabilities = relay_capabilities(self._relay)
        self._answers.reset()
        try:
            with trio.fail_after(settings.list_timeout):
                await up.connect()
                self._rediscovery.connected(up)
                self._logs.connected()
                listing = await up.list_tools()
                # Prompts or resources it fails to list leave it serving its tools.
                await self._prompt_resources.fetch(up)
        finally:
            if up.probe_died and self.era_hint == "auto":
                self.era_hint = "legacy"
        return up, listing

    async def serve(self, up: Upstream, transport: Transport, on_ready: Callable[[], None]) -> None:
        """Serve calls until the session ends; ``on_ready`` once calls can go (for a
        legacy HTTP session, once its push stream answered)."""
        # Cleared before the watcher starts: a transport that closes while the push
        # stream is being opened must still end the session.
        self._closed = False
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, transport.closed)
                nursery.start_soon(self._health.judge)
                if up.era == "modern":
                    # Whatever it declares now: it may declare a list's changes later
                    # (``rediscovery``), and the listen asks nothing until there is
                    # something to ask for.
                    nursery.start_soon(self._prompt_resources.listen, up, self._tool_list)
                # What the server pushes outside of any request: a legacy HTTP session's
                # stream (list_changed, pings, logs). The other transports return at once.
                await nursery.start(transport.listen)
                up.nursery = nursery  # calls that wait for their answer in a task
                self._scheduler.attach(up)
                on_ready()
                try:
                    await self._tend(up, transport)
                finally:
                    self._scheduler.detach()
                    # What the server answered until now settles the calls in doubt.
                    self._health.settle(self._scheduler.answered_at)
                    nursery.cancel_scope.cancel()

    async def _watch(self, event: trio.Event) -> None:
        await event.wait()
        self._closed = True
        self._wake.set()

    async def _ask(self, up: Upstream) -> None:
        """What is due of the server's lists, subscriptions and log level, each
        request bounded by ``list_timeout`` (``answer_wait``). A list is fetched
        under capabilities asked for again once their ttl passed (``rediscovery``)."""
        lists = self._prompt_resources
        if self._rediscovery.doubted or (
            (self._tool_list.due or lists.due) and self._rediscovery.due(up)
        ):
            with self._answers.bounded("server/discover", _CAPABILITIES_KEPT):
                changed = await self._rediscovery.renew(up)
            if changed:
                self._tool_list.due = True
                lists.capabilities_changed()
        if self._tool_list.due:
            await self._tool_list.refetch(up)
        await self._prompt_resources.tend(up)
        if self._logs.due:
            await self._logs.tend(up)

    async def _ask_probing(self, up: Upstream) -> None:
        """``_ask``, with a liveness probe asked for meanwhile sent at once: a call that
        ran out of time at a server that stopped answering ends the session within the
        probe's deadline, not the list's."""
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._health.probe_meanwhile, up)
                await self._ask(up)
                nursery.cancel_scope.cancel()

    async def _tend(self, up: Upstream, transport: Transport) -> None:
        self._health.schedule()
        while True:
            # Made before the work below, which awaits: news that comes meanwhile (the
            # transport closing, a wake) is then still there to wait for.
            self._wake = trio.Event()
            now = trio.current_time()
            if self._closed:
                raise transport.error or TransportError("closed")
            if self._auth is not None and self._auth.needs_login is not None:
                raise LoginRequired(self._auth.needs_login)
            self._policy.refresh(now)
            await self._health.tend(up, now)
            try:
                await self._ask_probing(up)
            except RanOut as exc:
                # Counted as a call that ran out of time is: a probe is asked for, and
                # a server that answers nothing at all is found out by it.
                self._health.ran_out(str(exc))
            deadline = min(
                self._health.next_wake(self._policy, now), self._prompt_resources.waits_until()
            )
            if (
                self._health.suspect
                or self._rediscovery.doubted
                or self._tool_list.due
                or self._prompt_resources.due
                or self._logs.due
            ):
                continue  # asked for while the loop was busy
            with trio.move_on_at(deadline):
                await self._wake.wait()
