"""Calls waiting for approval and the latest calls on the page, from the daemon's
approvals registry and the audit log's records in memory (``DaemonForAgents.approvals``,
``DaemonForAgents.audit``).

Approvals are for the daemon's own user and root, as ``mcpd approvals`` is: a reader
of one profile is shown none, and the page's Approve and Deny do what ``mcpd approvals
approve|deny`` does, with who opened the page deciding (``opener``): refused where
they are kin to the call's agent, or to any agent connected now. The page shows
the first ``APPROVALS_SHOWN`` in the order they came, each with its arguments as
``mcpd approvals`` shows them (at a glance: ``policy.shown.showing``); a call whose glance
has no room for every key is not approved here, but where its arguments are shown
whole (``mcpd approvals show``). The latest calls
are shown to every reader, of the servers and the profile the reader may see: a
profile's reader sees that profile's agents' calls; a reader of another user than the
daemon's own and root, the calls of its own user's agents only (``CallFilter.uid``),
as it is shown no server's stderr, pid or home.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final

from protocol.jsonrpc import messages as rpc

from ...audit.record import CallRecord as Record
from ...policy.deciders.kin import AgentKin
from ...policy.waiting.approvals import ApprovalError
from ...registry.profiles.views import ProfileView
from ..daemon_seam import DaemonForAgents
from .opener import Opener, check_decision, not_this_pages
from .sources import (
    APPROVALS_SHOWN,
    ApproveOrDeny,
    CallFilter,
    CallRow,
    PendingApproval,
    Sources,
    Waiting,
)

OWNER_ONLY: Final = "deciding calls is for the daemon's own user and root"
BY: Final = "the status page"
# The page's words for the audit log's outcomes.
OUTCOME_WORDS: Final = {"tool_error": "tool error"}


def policy_sources(
    control: DaemonForAgents, agents_kin: Callable[[], Awaitable[list[AgentKin]]]
) -> Sources:
    """``agents_kin``: who is kin to each agent connected now (``ProfileMethods``)."""

    def approvals(scope: ProfileView | None) -> Waiting[PendingApproval] | None:
        if scope is not None:
            return None
        waiting = control.approvals.list()
        first = [
            PendingApproval(
                v.id,
                v.server,
                v.tool,
                v.agent.label(),
                datetime.fromisoformat(v.since).timestamp(),
                v.arguments,
                v.shortened,
                v.keys_left_out,
            )
            for v in waiting[:APPROVALS_SHOWN]
        ]
        return Waiting(first, len(waiting) - len(first))

    async def decide(
        id: str, decision: ApproveOrDeny, scope: ProfileView | None, opener: Opener
    ) -> str:
        if scope is not None:
            raise rpc.RPCError(-32000, OWNER_ONLY)
        agents = await agents_kin()
        if decision == "approve":
            try:
                view, _ = control.approvals.waiting(id)
            except ApprovalError as exc:
                raise rpc.RPCError(-32000, str(exc)) from None
            if view.keys_left_out:
                raise rpc.RPCError(-32000, not_shown_whole(id))
        try:
            decided = control.approvals.decide(
                id,
                decision == "approve",
                BY,
                None,
                opener.on_page(),
                not_this_pages,
                refuse_others=lambda: check_decision(opener, agents),
            )
        except ApprovalError as exc:
            raise rpc.RPCError(-32000, str(exc)) from None
        done = "approved" if decision == "approve" else "denied"
        return f"{done} {decided.server}/{decided.original} for {decided.agent.label()}"

    def calls(scope: ProfileView | None, chosen: CallFilter) -> list[CallRow] | None:
        def keep(r: Record) -> bool:
            if chosen.server is not None and r.server != chosen.server:
                return False
            if chosen.outcome is not None and _word(r) != chosen.outcome:
                return False
            if chosen.uid is not None and r.agent.uid != chosen.uid:
                return False
            if scope is None:
                return True
            return r.agent.profile == scope.name and (
                r.server is None or scope.has_server(r.server)
            )

        return [
            CallRow(r.ts, r.server or "-", r.name or "-", r.agent.label(), _word(r), r.duration_ms)
            for r in control.audit.recent(keep, chosen.limit)
        ]

    return Sources(approvals=approvals, decide=decide, calls=calls)


def not_shown_whole(id: str) -> str:
    """Why a call the page could not show every key of is not approved from it."""
    return (
        "not every key of its arguments fits on the page: read them with `mcpd approvals"
        f" show {id}`, and approve it with `mcpd approvals approve {id}`"
    )


def _word(record: Record) -> str:
    return OUTCOME_WORDS.get(record.outcome, record.outcome)
