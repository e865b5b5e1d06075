"""What any audit record may hold, whatever an agent or a server sent: each text whole
up to ``NAME_KEPT`` characters, a longer one as its first ``NAME_SHOWN`` and how many more;
applied as the log takes a record, so the latest records kept in memory hold no more,
also past an agent's budget, and again once masking makes a text longer."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.audit import summed
from mcpd.audit.log import RECENT, AuditLog
from mcpd.audit.record import NAME_KEPT, NAME_SHOWN, CallRecord, bound, mask_texts
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo

HUGE = 10_000_000
AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", profile="default")


def record(**kw: Any) -> CallRecord:
    base: dict[str, Any] = {"ts": 1.0, "agent": AGENT, "method": "tools/call", "outcome": "ok"}
    return CallRecord(**{**base, **kw})


def cut(text: str) -> str:
    return f"{text[:NAME_SHOWN]}\u2026 (and {len(text) - NAME_SHOWN} more characters)"


def test_every_text_past_the_bound_is_cut_saying_so_and_shorter_ones_are_kept() -> None:
    long = "n" * (NAME_KEPT + 1)
    r = record(
        name=long,
        original="o" * HUGE,
        reason="r" * HUGE,
        decided_by="d" * HUGE,
        agent=msgspec.structs.replace(AGENT, exe="e" * HUGE, profile="p" * HUGE),
    )
    bound(r)
    assert (r.name, r.original, r.reason, r.decided_by) == (
        cut(long),
        cut("o" * HUGE),
        cut("r" * HUGE),
        cut("d" * HUGE),
    )
    assert (r.agent.exe, r.agent.profile) == (cut("e" * HUGE), cut("p" * HUGE))
    whole = record(name="n" * NAME_KEPT, original="o", reason=None)
    bound(whole)
    assert (whole.name, whole.original, whole.reason, whole.agent) == (
        "n" * NAME_KEPT,
        "o",
        None,
        AGENT,
    )


def test_the_latest_records_kept_in_memory_hold_no_more_than_the_bound() -> None:
    log = AuditLog(None, DaemonConfig(audit_journal=False))
    made_up, reason, original = "x" * HUGE, "y" * HUGE, "z" * HUGE
    for n in range(RECENT):
        # Within the agent's budget for requests refused at once, and past it.
        log.unrouted(record(ts=float(n), name=made_up, outcome="refused", reason=reason))
        log.record(record(ts=float(n), name="m", original=original))
    assert summed.BURST < RECENT
    kept = log.recent(lambda r: True, 2 * RECENT)
    assert len(kept) == RECENT
    held = sum(len(r.name or "") + len(r.original or "") + len(r.reason or "") for r in kept)
    assert held < RECENT * 2 * (NAME_SHOWN + 30)


def test_a_text_masking_makes_longer_is_cut_again() -> None:
    r = record(name="s" * NAME_KEPT)
    mask_texts(r, lambda text: text.replace("s", "[secret of servers.a.env.TOKEN]"))
    assert r.name is not None and r.name.endswith(
        f"(and {NAME_KEPT * 31 - NAME_SHOWN} more characters)"
    )
    assert len(r.name) < NAME_SHOWN + 40
