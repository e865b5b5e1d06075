"""What the agent side may ask of the rest of the daemon, and nothing more.

Two small interfaces. ``Servers`` is every configured server seen as one: the
aggregated tool table, the servers' states, and a way to hear when any of that
changes; ``Backend`` adds starting a call and what servers offer besides tools.
``Control`` is the daemon itself: its settings, whether it is ready, its status, the
servers' recent history, metrics, reload, the OAuth logins (``Logins``, for ``mcpd
auth``), the pins, the policy and the calls waiting for approval. The wiring
(``mcpd.daemon``) provides both; tests may provide doubles. ``LineSink`` is how a
connection writes its lines; the wiring hands over the implementation the stdio
transports use too, so a burst of requests and the writes it causes upstream share one
batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import msgspec
from msgspec import Raw

from protocol.loglevels import LogMessage

from ..audit.log import AuditLog
from ..config.model import DaemonConfig
from ..local.pinfile import PinKeeper
from ..policy.approvals import Approvals
from ..policy.gate import CallGate
from ..registry.claims import Budget
from ..registry.prompts import PromptEntry
from ..registry.scheme import Ambiguous, Routed, Sight, Undecided
from ..registry.shown import Entry
from ..registry.table import Listed
from ..registry.views import ProfileView
from ..servers.askback import Asker
from ..servers.calls import Call
from ..servers.history import ServerHistory
from ..servers.state import Said


class Servers(Protocol):
    @property
    def version(self) -> int:
        """Grows whenever what agents are listed changes."""
        ...

    def listing(self) -> Sequence[Listed]:
        """Every tool as agents get it (encoded as it is written), in listing order."""
        ...

    def lookup(self, name: str) -> Entry | None: ...

    def closest(self, name: str) -> list[str]:
        """Listed names like ``name``, for "did you mean"."""
        ...

    def refresh(self) -> None:
        """An agent is listing: refresh any server's list that went stale."""
        ...

    def states(self) -> list[dict[str, Any]]:
        """Per server: its state, whether it is available, and the outage if not."""
        ...

    def outages(self, only: Callable[[str], bool] | None = None) -> list[str]:
        """One sentence per unavailable server (whose alias ``only`` admits)."""
        ...

    def instructions(self, only: Callable[[str], bool] | None = None) -> list[Said]:
        """What each server (whose alias ``only`` admits) said of itself when mcpd
        connected to it, cleaned, with mcpd's note on it, in alias order."""
        ...

    def down_for(
        self, name: str, only: Callable[[str], bool] | None = None, template: str | None = None
    ) -> str | None:
        """For a tool name not listed: the outage of the unavailable server (whose alias
        ``only`` admits) it would belong to by its alias in the name, if there is one."""
        ...

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` whenever the tools, their availability or a state change."""
        ...

    def view_of(self, name: str) -> ProfileView:
        """A new view of the tools for the profile ``name`` (configured by the caller)."""
        ...


Keep = Callable[[str, str], bool]


class Offerings(Protocol):
    """What servers offer besides tools: prompts, resources, completions, tasks. What
    one agent sees of it is filtered by its profile (``keep`` for prompts; its
    ``sight`` for resources, None for everything): a server the profile does not show
    is no candidate for its URIs, and does not change the form they are handed in."""

    @property
    def prompt_resource_versions(self) -> tuple[int, int]:
        """(prompts, resources): each grows when what agents are listed of it changes
        (a profile keeps its own: ``ProfileView.offered``)."""
        ...

    def prompt_listing(self, keep: Keep | None = None) -> list[Raw]:
        """Every prompt, encoded; ``keep(alias, name)`` says which an agent sees."""
        ...

    def lookup_prompt(self, name: str) -> PromptEntry | None: ...

    def resource_listing(self, sight: Sight | None = None) -> list[Raw]:
        """Every resource ``sight`` shows, in the form its agents read it back by."""
        ...

    def template_listing(self, sight: Sight | None = None) -> list[Raw]: ...

    def route_uri(
        self, uri: str, budget: Budget, sight: Sight | None = None
    ) -> Routed | Ambiguous | Undecided | None:
        """Which of the servers ``sight`` shows an agent's URI goes to, and as what (an
        ``mcpd://`` form goes to the server it names, whoever it is: the caller checks
        it); the matching it takes is drawn from ``budget``."""
        ...

    def links(self, alias: str, sight: Sight | None = None) -> Callable[[str], str]:
        """What hands an agent of ``sight`` the URIs of one result of a server, each as
        it can read it back (``registry.resources``), all drawn from one matching
        budget."""
        ...

    def route_template(self, template: str, sight: Sight | None = None) -> tuple[str, str] | None:
        """(alias, the server's template) for a template as agents of ``sight`` are shown
        it."""
        ...

    def held_template(self, alias: str, uri: str, budget: Budget) -> str | None:
        """Why reading the server's ``uri`` is refused: only a held template of the
        server matches it (None: it is not)."""
        ...

    def era_of(self, alias: str) -> str | None:
        """The protocol era the server speaks now (None: not connected)."""
        ...

    async def request(
        self,
        alias: str,
        method: str,
        params: msgspec.Struct,
        *,
        name: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        asker: Asker | None = None,
    ) -> Raw:
        """prompts/get, resources/read, completion/complete, tasks/*: the raw result,
        or CallRefused (an outage) or the server's rpc.RPCError."""
        ...

    def subscribable(self, alias: str) -> bool: ...

    def subscribe_resource(self, alias: str, uri: str, on: bool) -> None: ...

    def watch_task(self, alias: str, task_id: str, on: bool) -> None: ...

    def on_resource_updated(self, listener: Callable[[str, str], None]) -> None:
        """``listener(alias, the server's URI)`` on each update of a subscribed URI."""
        ...

    def on_task_news(self, listener: Callable[[str, Raw], None]) -> None:
        """``listener(alias, params)`` on each ``notifications/tasks`` of a watched task."""
        ...

    def want_logs(self, level_for: Callable[[str], str | None]) -> None:
        """``level_for(alias)``: the most verbose log level agents want of that server
        (None: none), asked again whenever what agents want changes."""
        ...

    def on_log_message(self, listener: Callable[[str, LogMessage], None]) -> None:
        """``listener(alias, message)`` on each log message agents may be sent."""
        ...


class Logins(Protocol):
    """``mcpd auth``: the OAuth logins of the HTTP servers, by alias. Refusals raise
    ``rpc.RPCError`` with a message for the person at the terminal; no answer ever
    carries a token."""

    def status(self, only: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
        """The login of each HTTP server (whose alias ``only`` admits)."""
        ...

    async def begin(self, server: str, redirect_uri: str | None) -> dict[str, Any]:
        """``{"url", "login"}`` to send a person to, or the outcome when no browser
        is needed (client credentials)."""
        ...

    async def finish(self, server: str, login: str, redirect: str) -> dict[str, Any]:
        """Complete ``login`` with the redirect; the server's state once it tried."""
        ...

    async def logout(self, server: str) -> dict[str, Any]: ...


class Backend(Servers, Offerings, Protocol):
    """The servers as the wiring hands them over: tools, and everything else."""

    def start(self, call: Call) -> None:
        """Start a routed call (``call.alias`` its server, ``call.name`` the tool's name
        there): its outcome goes to ``call.caller`` once, maybe before this returns."""
        ...


class Control(Protocol):
    @property
    def settings(self) -> DaemonConfig:
        """The ``[daemon]`` table in force (it may change on reload)."""
        ...

    @property
    def ready(self) -> bool: ...

    def status(self, scope: ProfileView | None = None) -> dict[str, Any]:
        """``mcpd status``: everything (``scope`` None), or what an agent of the profile
        ``scope`` may read: its servers, its own profile, none of the daemon's paths."""
        ...

    def history(self, scope: ProfileView | None = None) -> list[ServerHistory]:
        """Each server's last day of states and last hour of calls (of the servers
        ``scope`` has), for the status page."""
        ...

    def metrics(self, scope: ProfileView | None = None) -> str:
        """Prometheus text for ``GET /metrics`` (of the servers ``scope`` has)."""
        ...

    async def reload(self) -> dict[str, Any]:
        """Re-read the config; raises ``rpc.RPCError`` when it is rejected."""
        ...

    @property
    def logins(self) -> Logins: ...

    @property
    def pins(self) -> PinKeeper:
        """``mcpd approve``, ``mcpd tools --pending|--findings`` and ``mcpd pins``."""
        ...

    @property
    def approvals(self) -> Approvals:
        """The calls waiting for a person (``mcpd approvals``)."""
        ...

    @property
    def audit(self) -> AuditLog:
        """The record of every call (``calls.jsonl``, the journal, the counts)."""
        ...

    @property
    def call_gate(self) -> CallGate:
        """The ``[[policy]]`` rules in force, their rate limits and the approvals."""
        ...

    def http_token(self) -> str:
        """The bearer token the HTTP endpoint wants now (``mcpd token --rotate`` changes it)."""
        ...

    def server_of(self, pid: int) -> str | None:
        """The server whose process ``pid`` is, or descends from (None: no server's)."""
        ...


class LineSink(Protocol):
    """A connection's ordered, non-blocking line writer."""

    limit: int

    @property
    def queued(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def put(self, line: bytes) -> str | None: ...

    def put_spliced(self, line: bytes) -> None:
        """A line that needs no check: one built by ``protocol.splice``."""
        ...

    def put_piece(self, piece: bytes | memoryview, end: bool = False) -> None:
        """Part of a line the caller has checked; nothing else is put until ``end``."""
        ...

    async def wait_room(self, limit: int | None = None) -> None: ...

    async def drain(self) -> None: ...

    async def run(self, write_timeout: float | None = None) -> None: ...

    def close(self) -> None: ...


class Lines(Protocol):
    """Makes a connection's ``LineSink``, batches the writes of one chunk read, and
    reads a chunk (waiting first when the last read emptied the socket)."""

    def writer(
        self, stream: Any, fd: int, limit: int, check: Callable[[bytes], str | None]
    ) -> LineSink: ...

    def batch(self) -> AbstractContextManager[None]: ...

    async def receive(self, fd: int, max_bytes: int, wait_first: bool = False) -> bytes: ...
