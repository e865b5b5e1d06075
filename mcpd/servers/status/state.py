"""A server's state as people and models see it, derived from what its runner knows.

The runner keeps the facts (its phase and downtime, the breaker, the restart
policy); the names shown in ``mcpd status``, in the tool list's outage marker, in call
results and in the journal are worked out here, in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from ...config.tables.model import DaemonConfig
from ...registry.gating.limits import NOUNS, Trimmed
from ...registry.tables.catalog import Catalog
from ...server_row import BreakerCounts, ServerInfo, ServerRow
from ..circuit.breaker import Breaker, BreakerConfig
from ..life.backoff import BackoffConfig, RestartPolicy
from ..life.downtime import Downtime
from .outage import Outage, iso_of_monotonic, last_line
from .stats import LatencyStats

# Every state, in the order summaries list them.
STATES: Final = (
    "ready",
    "degraded",
    "idle",
    "starting",
    "half_open",
    "open",
    "failed",
    "unreachable",
    "crash_loop",
    # OAuth: only a person's login (`mcpd auth login`) brings it back; not retried.
    "needs_login",
    # Its config names a variable or secret file this machine lacks: not retried.
    "unresolved",
    "stopped",
)


def breaker_config(d: DaemonConfig, *, probe_timeout: float) -> BreakerConfig:
    return BreakerConfig(
        failure_threshold=d.failure_threshold,
        cooldown_base=d.cooldown_base,
        cooldown_cap=d.cooldown_cap,
        probe_timeout=probe_timeout,
    )


def backoff_config(d: DaemonConfig) -> BackoffConfig:
    return BackoffConfig(
        base=d.backoff_base,
        cap=d.backoff_cap,
        max_restarts=d.max_restarts,
        window=d.crash_window,
        stable_after=d.stable_after,
    )


def server_state(d: Downtime, breaker: Breaker, now: float) -> str:
    """A child process (stdio) can crash, so a crash loop is what it is in; a server
    whose last attempt could not connect at all is unreachable."""
    phase = d.phase
    if phase == "connected":
        b = breaker.poll(now)
        if b != "closed":
            return b
        return "degraded" if failed_lately(d, breaker, now) else "ready"
    if phase == "waiting":
        if d.unreachable:
            return "unreachable"
        # A command that cannot start never crashed: it failed, however often.
        crashed = d.process and not d.not_started
        return "crash_loop" if crashed and d.policy.in_crash_loop else "failed"
    return phase


def failed_lately(d: Downtime, breaker: Breaker, now: float) -> bool:
    """Whether trouble that no call's success has followed yet is recent: within
    ``stable_after``, the time a server must stay up for its deaths to be forgotten.
    Trouble is a failure (which its breaker still counts), a call that ran out of
    time, or a circuit closed on trial; a server without calls is not shown failing
    for ever."""
    st = breaker.status(now)
    recent = now - d.policy.config.stable_after
    return any(at is not None and at > recent for at in (st.trouble_at, st.trial_since))


def outage_of(
    alias: str,
    state: str,
    breaker: Breaker,
    d: Downtime,
    now: float,
    stderr: list[str] | None = None,
) -> Outage:
    """Why calls to the server cannot be expected to work, and when mcpd tries again
    (``stderr``: a child's last lines, for a server that failed or keeps crashing)."""
    last_error, down_since, retry_at = d.last_error, d.down_since, d.retry_at
    if state in ("failed", "crash_loop") and stderr:
        last = last_line(stderr)
        return Outage(alias, state, last_error or "not running", down_since, retry_at, last)
    if state in ("open", "half_open"):
        st = breaker.status(now)
        return Outage(alias, state, st.reason or "too many failures", st.since, st.retry_at)
    if state == "starting":
        reason = f"still starting (last error: {last_error})" if last_error else "still starting"
        return Outage(alias, state, reason, down_since, retry_at)
    if state == "stopped":
        return Outage(alias, state, last_error or "stopped", down_since)
    return Outage(alias, state, last_error or "not running", down_since, retry_at)


class Reported(NamedTuple):
    """What ``status_row`` reads of a runner, handed over by the runner."""

    alias: str
    state: str
    transport_kind: str
    downtime: Downtime
    stderr: list[str]
    breaker: Breaker
    policy: RestartPolicy
    stats: LatencyStats
    inflight: int
    waiting: int
    dropped_tools: list[str]


def status_row(
    r: Reported,
    *,
    era: str | None,
    version: str | None,
    tools: int,
    now: float,
    server_info: ServerInfo | None = None,
    cache_scope: str | None = None,
) -> ServerRow:
    """One server's entry in ``mcpd status``: what its runner knows of it."""
    b = r.breaker.status(now)
    d = r.downtime
    snap = r.stats.snapshot()
    since = d.down_since if d.down_since is not None else d.since
    last_error = d.last_error
    if b.state != "closed" and d.phase == "connected":
        # Open or probing while the session is up: the calls that failed say why, and
        # since when. Once the session is down, its downtime says why it is now.
        since = b.since if b.since is not None else since
        last_error = b.reason or last_error
    elif last_error is None and r.state == "degraded":
        last_error = b.trouble or b.reason  # what the last failed call met
    retry_at = d.retry_at if d.phase == "waiting" else b.retry_at
    return ServerRow(
        alias=r.alias,
        transport=r.transport_kind,
        state=r.state,
        era=era,
        protocol_version=version,
        server_info=server_info,
        list_cache_scope=cache_scope,
        tools=tools,
        since=iso_of_monotonic(since),
        last_error=last_error,
        retry_at=iso_of_monotonic(retry_at),
        restarts=r.policy.restarts,
        breaker=BreakerCounts(
            state=b.state,
            consecutive_failures=b.consecutive_failures,
            failures=b.total_failures,
            opened=b.times_opened,
        ),
        calls=snap.calls,
        errors=snap.errors,
        p50_ms=_ms(snap.p50),
        p95_ms=_ms(snap.p95),
        p99_ms=_ms(snap.p99),
        inflight=r.inflight,
        waiting=r.waiting,
        stderr=r.stderr[-5:] if r.transport_kind == "stdio" else [],
        dropped_tools=r.dropped_tools,
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


# A server's lists besides its tools, in the order they are shown.
_OTHER_LISTS: Final = ("prompts", "resources", "resource_templates")


class ListTrims(NamedTuple):
    """Beside ``dropped_tools`` in ``mcpd status``: what the server's other lists left
    out, and what of all its lists and its instructions was kept with less, each with
    why (mcpd's limits, or an item agents could not be shown as it was)."""

    dropped_prompts: list[str]
    dropped_resources: list[str]
    dropped_resource_templates: list[str]
    cut: list[str]


def list_trims(
    tools_cut: list[str], others: Mapping[str, Trimmed], instructions_cut: str
) -> ListTrims:
    prompts, resources, templates = (
        others[kind] if kind in others else Trimmed() for kind in _OTHER_LISTS
    )
    cut = list(tools_cut)
    for t in (prompts, resources, templates):
        cut += t.cut
    return ListTrims(
        list(prompts.dropped),
        list(resources.dropped),
        list(templates.dropped),
        [*cut, instructions_cut] if instructions_cut else cut,
    )


class Said(NamedTuple):
    """What a server said of itself for models (cleaned), and mcpd's own note on it."""

    alias: str
    note: str  # mcpd's words ("" if none)
    text: str  # the server's words ("" if none)


def short_lists(tools: bool, others: Mapping[str, Trimmed]) -> str:
    """For models, beside the server's instructions: which of its lists are only partly
    shown because they are longer than their limits ("" if none). ``tools``: whether
    its tool list is."""
    kinds = ["tools"] if tools else []
    kinds += [NOUNS[k][0] for k in _OTHER_LISTS if k in others and others[k].short]
    if not kinds:
        return ""
    return (
        f"this server lists more {', '.join(kinds)} than mcpd's limits allow; "
        "only the first ones are shown"
    )


def prompt_resource_counts(catalog: Catalog, alias: str) -> tuple[int, int, int]:
    """The server's prompts, resources and templates in ``mcpd status``."""
    resources, templates = catalog.resources.count(alias)
    return catalog.prompts.count(alias), resources, templates


def states_summary(states: dict[str, str]) -> str:
    """One line for ``mcpd status`` and the journal: "5 servers: 4 ready, 1 open
    (tickets)"."""
    return _line(states, named=True)


def counts(states: dict[str, str]) -> str:
    """One line for systemd's STATUS=, which every local user can read (``systemctl
    status``): how many servers are in each state, and where those mcpd lets see them
    find which: "5 servers: 4 ready, 1 open (mcpd status and the journal say which)"."""
    line = _line(states, named=False)
    if any(state not in ("ready", "idle") for state in states.values()):
        line += " (mcpd status and the journal say which)"
    return line


def _line(states: dict[str, str], *, named: bool) -> str:
    by_state: dict[str, list[str]] = {}
    for alias in sorted(states):
        by_state.setdefault(states[alias], []).append(alias)
    parts = []
    for state in STATES:
        names = by_state.get(state)
        if not names:
            continue
        text = f"{len(names)} {state}"
        if named and state not in ("ready", "idle"):
            text += f" ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
        parts.append(text)
    n = len(states)
    return f"{n} server{'s' if n != 1 else ''}: " + (", ".join(parts) if parts else "none")
