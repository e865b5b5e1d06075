"""Held definition changes on the page, from the daemon's pins (``DaemonForAgents.pins``): what
``mcpd approve`` shows and does, for the daemon's own user and root only, as on the
socket (``pins_methods``), and never for a page opened from an agent's side (``opener``).
A reader of one profile is shown nothing of them.

A change is shown as a diff of the definition as approved and as offered now, cut to
a bound (``helddiff``); the first ``HELD_SHOWN`` changes only, as ``mcpd tools
--pending`` lists them, and how many more wait. A diff is made once for what it
compares: it is kept, by the two digests, while its change is shown. A change whose
diff leaves part of it out is not approved here, as a call whose arguments do not all
fit is not: ``mcpd approve`` shows it whole. What the finding rules flagged in what is
offered goes with each change, as ``mcpd approve`` and the journal say it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from protocol.jsonrpc import messages as rpc

from ...policy.deciders.kin import AgentKin
from ...registry.gating.judged import HELD_KINDS, HeldOffer, held_reason
from ...registry.gating.judged import held_label as shown_label
from ...registry.pinning.definitions import bare
from ...registry.profiles.views import ProfileView
from ..daemon_seam import DaemonForAgents
from .helddiff import HeldDiff, held_diff
from .opener import Opener, check_release
from .sources import HELD_SHOWN, HeldChange, Sources, Waiting

OWNER_ONLY: Final = "approving held changes is for the daemon's own user and root"


def pin_sources(
    control: DaemonForAgents, agents_kin: Callable[[], Awaitable[list[AgentKin]]]
) -> Sources:
    """``agents_kin``: who is kin to each agent connected now (``ProfileMethods``)."""
    diffs: dict[tuple[str, str], HeldDiff] = {}

    def held(scope: ProfileView | None) -> Waiting[HeldChange] | None:
        if scope is not None:
            return None
        waiting = control.pins.waiting()
        shown = []
        made: dict[tuple[str, str], HeldDiff] = {}
        for p in waiting[:HELD_SHOWN]:
            compared = _compared(p)
            diff = made[compared] = diffs.get(compared) or _diff(p)
            reason = held_reason(p.why, p.server, p.rules)
            shown.append(
                HeldChange(
                    p.server,
                    p.kind,
                    p.name,
                    reason,
                    diff.text,
                    digest=p.offered.digest,
                    cut=diff.cut,
                    findings=p.findings,
                )
            )
        diffs.clear()
        diffs.update(made)  # the diffs of what is shown now, and no other
        return Waiting(shown, len(waiting) - len(shown))

    async def release(
        server: str, kind: str, name: str, digest: str, scope: ProfileView | None, opener: Opener
    ) -> str:
        if scope is not None:
            raise rpc.RPCError(-32000, OWNER_ONLY)
        check_release(opener, await agents_kin())
        picked = next((k for k in HELD_KINDS if k == kind), None)
        if picked is None:
            raise rpc.RPCError(-32000, f"{kind!r} is not a kind of item mcpd holds")
        label = shown_label(picked, name)
        if _cut_on_page(server, picked, name):
            raise rpc.RPCError(
                -32000,
                f"{label} of {server} changed more than the page shows: approve it with "
                f"`mcpd approve {server}`, which shows all of it",
            )
        try:
            result = await control.pins.approve(server, [(picked, name, digest)])
        except KeyError:
            raise rpc.RPCError(-32000, f"no server named {server!r}") from None
        if label in result.get("stale", []):
            raise rpc.RPCError(-32000, f"{label} of {server} changed again since; reload the page")
        if label in result.get("whole_only", []):
            raise rpc.RPCError(
                -32000,
                f"{label} of {server} is released with its server alone: run "
                f"`mcpd approve {server}`",
            )
        if label not in result.get("approved", []):
            raise rpc.RPCError(-32000, f"no {label} of {server} waits for approval")
        return f"{server}: {label} approved"

    def _cut_on_page(server: str, kind: str, name: str) -> bool:
        """Whether the page's diff of the held item leaves part of its change out."""
        for p in control.pins.waiting():
            if (p.server, p.kind, p.name) == (server, kind, name):
                return (diffs.get(_compared(p)) or _diff(p)).cut
        return False

    return Sources(held=held, release=release)


def _compared(item: HeldOffer) -> tuple[str, str]:
    """What a held item's diff is made of: the digest offered, and the one approved
    or what stands in for it."""
    approved = item.approved
    if approved is not None and not bare(approved):
        return item.offered.digest, approved.digest
    return item.offered.digest, _approved(item)[1]


def _approved(item: HeldOffer) -> tuple[bytes | None, str]:
    """The definition approved, where it is known, and the diff's name for it."""
    if item.approved is not None and not bare(item.approved):
        return bytes(item.approved.definition), "approved"
    # A change of a pin kept by its digest alone: what was approved is not known.
    if item.why in ("changed", "forgotten"):
        return None, "(approved, its definition not kept)"
    return None, "(nothing approved)"


def _diff(item: HeldOffer) -> HeldDiff:
    approved, label = _approved(item)
    return held_diff(approved, bytes(item.offered.definition), label)
