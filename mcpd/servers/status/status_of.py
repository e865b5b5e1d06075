"""One server's entry in ``mcpd status``, gathered from its parts: the state and the
counters ``state.status_row`` makes of them, and what its session, its lists, its
sandbox, its login and its pins add."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import trio
from msgspec import UNSET, UnsetType

from ...config.sandboxing.per_server import sandbox_of, sandbox_status
from ...login_answers import LoginStatus
from ...server_row import HeldBackRow, SandboxStatus, ServerRow
from .outage import iso_of_monotonic
from .state import Reported, list_trims, prompt_resource_counts, status_row

if TYPE_CHECKING:
    from ..life.server_parts import ServerParts


def status_of(parts: ServerParts) -> ServerRow:
    up = parts.upstream
    reported = Reported(
        alias=parts.alias,
        state=parts.state,
        transport_kind=parts.transport_kind,
        downtime=parts.downtime,
        stderr=parts.stderr,
        breaker=parts.breaker,
        policy=parts.policy,
        stats=parts.stats,
        inflight=parts.inflight,
        waiting=parts.waiting,
        dropped_tools=parts.tool_list.dropped,
    )
    row = status_row(
        reported,
        era=up.era if up else None,
        version=up.version if up else None,
        tools=parts.registry.count(parts.alias),
        now=trio.current_time(),
        server_info=up.server_info if up else None,
        cache_scope=parts.tool_list.cache_scope if up else None,
    )
    # Read more slowly than it sends (transports.read_pace), its list fetched less
    # often than it announces changes (tool_list), or a list asked for again and
    # not answered in time, or failing (answer_wait), and why.
    held = up.transport.held_back if up is not None else None
    held = held or parts.tool_list.held_back or (parts.answers.trouble if up else None)
    held_back = (
        None
        if held is None
        else HeldBackRow(reason=held.reason, since=iso_of_monotonic(held.since))
    )
    sandbox: SandboxStatus | UnsetType = UNSET
    if parts.cfg.command is not None:
        # Before a start (lazy, or not yet): what a start would meet on this machine.
        started = parts.attempts > 0 and parts.cfg.start != "lazy"
        box = sandbox_of(parts.alias, parts.cfg, parts.config)
        sandbox = sandbox_status(box, parts.unprotected if started else None, started)
    auth: LoginStatus | UnsetType = UNSET
    if parts.login is not None and parts.auth is not None and parts.auth.enabled:
        auth = parts.login.status()
    trims = list_trims(
        parts.tool_list.cut, parts.prompt_resources.trimmed, up.instructions_cut if up else ""
    )
    prompts, resources, templates = prompt_resource_counts(parts.registry, parts.alias)
    pins = parts.registry.gate.review.counts(parts.alias)
    # The more names it had mcpd forget the pins of (``forgotten``), the likelier a
    # name it never listed is held as one of them.
    marked = parts.registry.gate.review.pins.servers.get(parts.alias)
    row = msgspec.structs.replace(
        row,
        # The child's pid (stdio servers only): what to look at with ps, strace or kill.
        pid=up.transport.pid if up is not None else None,
        held_back=held_back,
        sandbox=sandbox,
        auth=auth,
        secrets_masked=parts.guard.masked(parts.alias),
        prompts=prompts,
        resources=resources,
        resource_templates=templates,
        dropped_prompts=trims.dropped_prompts,
        dropped_resources=trims.dropped_resources,
        dropped_resource_templates=trims.dropped_resource_templates,
        cut=trims.cut,
        held=pins["held"],
        definition_changes=pins["definition_changes"],
        findings=pins["findings"],
        forgotten_names=0 if marked is None else marked.forgotten_names(),
        start=UNSET if parts.lazy is None else "lazy",
        idle_stop=UNSET if parts.lazy is None else parts.lazy.idle_stop,
    )
    return parts.guard.shown_row(row)
