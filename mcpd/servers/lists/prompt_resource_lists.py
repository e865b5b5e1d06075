"""One server's prompts, resources and templates: listed, kept current, subscribed.

Each list is fetched whole (every page, like tools) after the server connects (each
whatever becomes of the other), and again when it says the list changed:
``notifications/{prompts,resources}/list_changed``, unsolicited from a legacy server,
on the subscription from a modern one. Resource update subscriptions are held for the
agents that asked, once per URI whatever the number of agents: ``resources/subscribe``
on a legacy session (sent again after a reconnect), the URI in the
``subscriptions/listen`` filter for a modern server (which is listened to again when the
set of URIs changes). Either is brought up to date no
sooner than ``MIN_RESUBSCRIBE`` after the last time, with every change made meanwhile,
and the listen in force tells updates until then. How many URIs agents may hold, and
how long, is bounded where they ask (``agents.news.subscriptions``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.errors import ServerCancelled, TransportError

from ...registry.gating.limits import Trimmed
from ...registry.tables.catalog import Catalog
from ..connected.answer_wait import LIST_FAILURES, AnswerWait
from ..connected.upstream import Upstream
from .list_pages import list_all
from .listened import ListenedURIs, honoured
from .tool_list_keeper import ToolListKeeper

logger = logging.getLogger("mcpd.server")

Updated = Callable[[str, str], None]  # (alias, the server's URI)
TaskNews = Callable[[str, msgspec.Raw], None]  # (alias, the notification's params)
Fetch = Callable[[Upstream], Awaitable[None]]
_RELISTEN_CAP: Final = 60.0
# A list the server says changed is fetched again no sooner than this after its last
# fetch ended: a server announcing a change after every fetch cannot keep mcpd busy
# fetching and rebuilding. What it announces meanwhile is in the list fetched then.
MIN_REFETCH: Final = 1.0
# Likewise for telling a server of changed subscriptions: a listen sends every URI, and
# agents subscribing and letting go all the time would have it sent without end.
MIN_RESUBSCRIBE: Final = 1.0
_KEPT: Final = (
    "the list fetched before is served, and asked for again when the server next announces a change"
)
# Connecting, the server may have given the list before it was started anew, or never.
_CONNECTED: Final = (
    "what it listed before, if anything, is served, and its list is asked for again when it "
    "next announces a change"
)
_RESUBSCRIBE: Final = "it is sent again when agents' subscriptions next change"


class _Updated(msgspec.Struct):
    uri: str


class PromptResourceKeeper:
    def __init__(
        self,
        alias: str,
        catalog: Catalog,
        wake: Callable[[], None],
        changed: Callable[[], None],
        answers: AnswerWait | None = None,
    ) -> None:
        """``answers`` bounds the wait for what the server answers (none: unbounded)."""
        self.alias = alias
        self._answers = answers or AnswerWait(alias)
        self.catalog = catalog
        self._wake = wake
        self._changed = changed
        self.on_updated: Updated | None = None
        self.on_task: TaskNews | None = None
        self.prompts_due = False
        self.resources_due = False
        # The server's URIs agents are subscribed to, with how many subscriptions each.
        self.subscribed: dict[str, int] = {}
        self.watched_tasks: set[str] = set()
        # What the server's last acknowledgement of our listen said it honours.
        self.acknowledged: dict[str, Any] = {}
        self.listened = ListenedURIs()
        self.held: set[str] = set()  # subscribed upstream on the current legacy session
        # What the last fetch of each list left out ("prompts", "resources",
        # "resource_templates").
        self.trimmed: dict[str, Trimmed] = {}
        self._sync_due = False
        self._sync_after = -math.inf  # when a legacy session may be told of changes
        self._relisten = trio.Event()
        # When each list may be fetched again.
        self._prompts_after = -math.inf
        self._resources_after = -math.inf

    # -- fetching --

    async def fetch(self, up: Upstream) -> None:
        """After connecting: every list the server offers, then the subscriptions. A
        list the server fails to give is said as one fetched again is (``_fetch_again``),
        and neither the other list nor the subscriptions wait on it: they are the
        server's all the same."""
        self.held = set()
        await self._fetch_again(up, self._fetch_prompts, "prompts/list", _CONNECTED, "prompts")
        kinds = ("resources", "resource_templates")
        await self._fetch_again(up, self._fetch_resources, "resources/list", _CONNECTED, *kinds)
        self._sync_due = bool(self.subscribed)
        self._sync_after = -math.inf  # a new session holds none of them yet

    async def _fetch_prompts(self, up: Upstream) -> None:
        self.prompts_due = False
        self.trimmed.pop("prompts", None)
        if not up.capabilities.prompts:
            # Offered no more (said when asked again, or at a restart): listed no more.
            if self.catalog.prompts.withdraw(self.alias):
                self._changed()
            return
        try:
            with self._answers.bounded("prompts/list", _KEPT):
                prompts, self.trimmed["prompts"] = await list_all(
                    up, "prompts/list", "prompts", features.Prompt, "prompts"
                )
        finally:
            self._prompts_after = trio.current_time() + MIN_REFETCH
        if self.catalog.prompts.update(self.alias, prompts):
            self._changed()

    async def _fetch_resources(self, up: Upstream) -> None:
        self.resources_due = False
        self.trimmed.pop("resources", None)
        self.trimmed.pop("resource_templates", None)
        if not up.capabilities.resources:
            if self.catalog.resources.withdraw(self.alias):
                self._changed()
            return
        try:
            await self._list_resources(up, self.catalog)
        finally:
            self._resources_after = trio.current_time() + MIN_REFETCH

    async def _list_resources(self, up: Upstream, catalog: Catalog) -> None:
        with self._answers.bounded("resources/list", _KEPT):
            resources, self.trimmed["resources"] = await list_all(
                up, "resources/list", "resources", features.Resource, "resources"
            )
        try:
            with self._answers.bounded("resources/templates/list", _KEPT):
                templates, trimmed = await list_all(
                    up,
                    "resources/templates/list",
                    "resourceTemplates",
                    features.ResourceTemplate,
                    "resource_templates",
                )
        except rpc.RPCError:
            # A server with resources but no templates may refuse the method.
            templates, trimmed = [], Trimmed()
        self.trimmed["resource_templates"] = trimmed
        if catalog.resources.update(self.alias, resources, templates):
            self._changed()

    async def _fetch_again(
        self, up: Upstream, fetch: Fetch, method: str, then: str, *kinds: str
    ) -> None:
        """A list fetched again (with ``fetch``, by ``method``, of ``kinds``): one the
        server fails to give keeps the list fetched before, with what was left out of
        it (``answer_wait.LIST_FAILURES``); ``then`` says so."""
        kept = {kind: self.trimmed[kind] for kind in kinds if kind in self.trimmed}
        try:
            await fetch(up)
        except LIST_FAILURES as exc:
            self.trimmed |= kept
            self._answers.failed(method, exc, then)
        else:
            self._answers.listed(method)

    def capabilities_changed(self) -> None:
        """The server declares other capabilities than it did (``rediscovery``): each
        list is fetched again under them, and the listen asks for what they offer."""
        self.prompts_due = self.resources_due = True
        self._relisten.set()
        self._wake()

    def _prompts_now(self) -> bool:
        return self.prompts_due and trio.current_time() >= self._prompts_after

    def _resources_now(self) -> bool:
        return self.resources_due and trio.current_time() >= self._resources_after

    def _sync_now(self) -> bool:
        return self._sync_due and trio.current_time() >= self._sync_after

    @property
    def due(self) -> bool:
        """Whether ``tend`` has something to do now."""
        return self._prompts_now() or self._resources_now() or self._sync_now()

    def waits_until(self) -> float:
        """When a list announced as changed may be fetched, or changed subscriptions
        sent (inf: none is waiting)."""
        waiting = [self._prompts_after] if self.prompts_due else []
        waiting += [self._resources_after] if self.resources_due else []
        waiting += [self._sync_after] if self._sync_due else []
        return min(waiting, default=math.inf)

    async def tend(self, up: Upstream) -> None:
        """From the server's own task: whatever is due now."""
        if self._prompts_now():
            await self._fetch_again(up, self._fetch_prompts, "prompts/list", _KEPT, "prompts")
        if self._resources_now():
            kinds = ("resources", "resource_templates")
            await self._fetch_again(up, self._fetch_resources, "resources/list", _KEPT, *kinds)
        if self._sync_now():
            if up.era == "legacy":
                await self._sync_legacy(up)
            else:
                self._sync_due = False  # a modern server hears it on the listen

    # -- notifications --

    def on_notification(self, msg: rpc.Notification) -> None:
        method = msg.method
        if method == "notifications/prompts/list_changed":
            self.prompts_due = True
            self._wake()
        elif method == "notifications/resources/list_changed":
            self.resources_due = True
            if self.listened.listed_anew():
                self._relisten.set()
            self._wake()
        elif method == "notifications/resources/updated":
            try:
                # Only its uri is read: whatever else the server put there is skipped.
                uri = rpc.decode_as(msg.params, _Updated).uri
            except rpc.InvalidParams:
                return
            if self.on_updated is not None:
                self.on_updated(self.alias, uri)
        elif method == "notifications/tasks" and self.on_task is not None and msg.params:
            self.on_task(self.alias, msg.params)
        elif method == "notifications/subscriptions/acknowledged":
            self.acknowledged = honoured(msg.params)
            if self.listened.acknowledged():
                self._relisten.set()

    # -- subscriptions --

    def add_subscription(self, uri: str) -> None:
        self.subscribed[uri] = self.subscribed.get(uri, 0) + 1
        if self.subscribed[uri] == 1:
            self._subscriptions_changed()

    def drop_subscription(self, uri: str) -> None:
        left = self.subscribed.get(uri, 0) - 1
        if left > 0:
            self.subscribed[uri] = left
            return
        if self.subscribed.pop(uri, None) is not None:
            self.listened.let_go(uri)
            self._subscriptions_changed()

    def watch_task(self, task_id: str, on: bool) -> None:
        before = len(self.watched_tasks)
        (self.watched_tasks.add if on else self.watched_tasks.discard)(task_id)
        if len(self.watched_tasks) != before:
            self._relisten.set()

    def session_ended(self) -> None:
        """The tasks watched were the ended session's: a server started again knows
        none of them, and may give their ids to new tasks of other agents."""
        self.watched_tasks.clear()

    def _subscriptions_changed(self) -> None:
        self._sync_due = True
        self._relisten.set()
        self._wake()

    async def _sync_legacy(self, up: Upstream) -> None:
        self._sync_due = False
        self._sync_after = trio.current_time() + MIN_RESUBSCRIBE
        if not up.capabilities.subscribe:
            return
        for uri in sorted(set(self.subscribed) - self.held):
            await self._legacy_request(up, "resources/subscribe", uri)
            self.held.add(uri)
        for uri in sorted(self.held - set(self.subscribed)):
            self.held.discard(uri)
            await self._legacy_request(up, "resources/unsubscribe", uri)

    async def _legacy_request(self, up: Upstream, method: str, uri: str) -> None:
        try:
            with self._answers.bounded(method, _RESUBSCRIBE):
                await up.request(method, features.SubscribeParams(uri=uri))
        except rpc.RPCError as exc:
            logger.info(
                "%s: %s %s refused: %s",
                self.alias,
                method,
                uri,
                quote(exc.message),
                extra=log_extra(self.alias, reason=quote(exc.message)),
            )

    def supports_subscriptions(self, up: Upstream | None) -> bool:
        return up is not None and up.capabilities.subscribe

    # -- the modern subscription --

    def _filter(self, up: Upstream) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        if up.capabilities.prompts_changed:
            wanted["promptsListChanged"] = True
        if up.capabilities.resources_changed:
            wanted["resourcesListChanged"] = True
        uris = self.listened.naming(self.subscribed if up.capabilities.subscribe else ())
        if uris:
            wanted["resourceSubscriptions"] = uris
        if self.watched_tasks and up.capabilities.tasks:
            wanted["taskIds"] = sorted(self.watched_tasks)
        return wanted

    async def listen(self, up: Upstream, lists: ToolListKeeper) -> None:
        """Keep one ``subscriptions/listen`` open for everything this server can tell
        (tools too), listening again when it ends, when the filter changes, and when
        the server refuses it: without the URIs it refused (``listened``), or as it
        was after a backoff. One agent's URI never ends what the others are told."""
        self.listened.session_began()
        delay = 1.0
        began = -math.inf
        while True:
            await trio.sleep_until(began + MIN_RESUBSCRIBE)
            began = trio.current_time()
            wanted = self._filter(up)
            if up.lists_changes:
                wanted["toolsListChanged"] = True
            self._relisten = trio.Event()
            why = ""
            refusal: rpc.RPCError | None = None
            async with trio.open_nursery() as nursery:

                async def restart_on_change(after: float) -> None:
                    await self._relisten.wait()
                    # The listen in force goes on until the next may begin, which
                    # takes every change made until then.
                    await trio.sleep_until(after)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(restart_on_change, began + MIN_RESUBSCRIBE)
                try:
                    if wanted:
                        await up.listen_for(wanted)
                        why = "the server ended the subscription"
                    else:
                        await trio.sleep(math.inf)
                except ServerCancelled as exc:
                    why = str(exc)
                except rpc.RPCError as exc:
                    refusal = exc
                except TransportError as exc:
                    why = exc.reason
                nursery.cancel_scope.cancel()
            lists.subscribed = False
            if refusal is not None:
                then = self.listened.refusal(self.alias, refusal, delay)
                if then == "at once":
                    began = -math.inf
                elif then == "backoff":
                    # Told nothing on a listen, the tool list is kept by its ttl.
                    with trio.move_on_after(delay):
                        await self._relisten.wait()
                    delay = min(delay * 2, _RELISTEN_CAP)
                continue
            if not why:
                delay = 1.0
                continue  # the filter changed: listen again
            logger.debug("%s: subscription ended (%s)", self.alias, why)
            # Changes may have happened while nobody listened.
            lists.request()
            self.prompts_due = self.resources_due = True
            self._wake()
            with trio.move_on_after(delay):
                await self._relisten.wait()
            delay = min(delay * 2, _RELISTEN_CAP)
