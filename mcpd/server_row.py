"""One server's row in ``mcpd status``, with what it holds (its circuit's counts, why it
is read less than it asks, what it says of itself, its sandbox, its login); and the two
shorter things said of a server: its state as a tool listing's ``_meta`` and
``/healthz`` carry it (``ServerState``), and what ``mcpd reset`` did
(``ResetOutcome``).

Both ends read these: the daemon builds them (``servers.status``) and the command line
decodes its replies into them, so they hold only msgspec values and import nothing of
mcpd's but the other answers it holds. A field unset is a key the JSON leaves out: what
only some servers have (a sandbox, a login, a lazy start), and what a reader other
than the daemon's own user or root does not see (stderr, the pid, the sandbox's home).
The fields are in the order the JSON shows them."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from .login_answers import LoginStatus


class ServerInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """A server's name, version and title as it gives them: shown, never trusted."""

    name: str | None = None
    version: str | None = None
    title: str | None = None


class SandboxStatus(msgspec.Struct, kw_only=True):
    """A server's sandbox as ``mcpd status --json`` shows it. ``home`` is a path in the
    state directory, unset where the reader is not the daemon's own user or root. Its
    level is any text, as the last masking pass over a row may leave it."""

    level: str
    unprotected: str | None
    home: str | msgspec.UnsetType = msgspec.UNSET
    read: list[str]
    write: list[str]
    network: bool
    host_loopback: list[int]
    limits: dict[str, int | None]


class BreakerCounts(msgspec.Struct, kw_only=True):
    state: str
    consecutive_failures: int
    failures: int
    opened: int


class HeldBackRow(msgspec.Struct, kw_only=True):
    """Why mcpd reads or lists a server less than it asks, since an ISO date."""

    reason: str
    since: str | None


class ServerRow(msgspec.Struct, kw_only=True):
    alias: str
    transport: str
    state: str
    era: str | None
    protocol_version: str | None
    server_info: ServerInfo | None
    list_cache_scope: str | None
    tools: int
    # ISO dates; down: since the outage began, not since the last retry's phase change.
    since: str | None
    last_error: str | None
    retry_at: str | None
    restarts: int
    breaker: BreakerCounts
    calls: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    inflight: int
    waiting: int
    stderr: list[str] | UnsetType = UNSET  # a child's last lines
    dropped_tools: list[str]
    pid: int | UnsetType | None = UNSET
    held_back: HeldBackRow | None = None
    sandbox: SandboxStatus | UnsetType = UNSET  # stdio servers
    # Its login (HTTP servers whose own headers are not their credentials), as
    # ``ServerAuth.status`` says it.
    auth: LoginStatus | UnsetType = UNSET
    # Secrets mcpd holds found in what it sent, by whose they were: never the values.
    secrets_masked: dict[str, int] = {}
    prompts: int = 0
    resources: int = 0
    resource_templates: int = 0
    # What its lists left out, and what of them and its instructions was kept with less.
    dropped_prompts: list[str] = []
    dropped_resources: list[str] = []
    dropped_resource_templates: list[str] = []
    cut: list[str] = []
    # Items held until approved, definition changes seen, items with findings, and
    # about how many names it had mcpd forget the pins of.
    held: int = 0
    definition_changes: int = 0
    findings: int = 0
    forgotten_names: int = 0
    start: str | UnsetType = UNSET  # "lazy": started on demand
    idle_stop: float | UnsetType = UNSET
    # What the server's own settings name that it does not list: the operator's.
    warnings: list[str] = []


class ServerState(msgspec.Struct, kw_only=True):
    server: str
    state: str
    available: bool
    # An unavailable server's outage: why, and since and until when (ISO dates).
    reason: str | UnsetType = UNSET
    since: str | UnsetType | None = UNSET
    retry_at: str | UnsetType | None = UNSET


class ResetOutcome(msgspec.Struct, kw_only=True):
    """``mcpd reset``: the server's state and circuit before, whether a circuit was
    closed, and a wait it leaves (one to be started or connected again, till
    ``next_try``, a clock time)."""

    server: str
    was: str
    circuit: str
    reset: bool
    state: str
    waiting: bool
    next_try: str | None
