"""The audit's counters for ``GET /metrics``: calls by server, method, outcome and
policy decision, and what the audit log could not write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ..local.prometheus import Writer
from .record import CallRecord

CountKey = tuple[str, str, str, str]  # (server, method, outcome, decision)


class CallCounts:
    def __init__(self) -> None:
        self.calls: Counter[CountKey] = Counter()
        self.dropped = 0  # records counted here but not written: the buffer was full
        self.write_errors = 0  # batches the file could not take

    def add(self, record: CallRecord) -> None:
        self.calls[record.server or "", record.method, record.outcome, record.decision] += 1

    def samples(self, only: Callable[[str], bool] | None = None) -> list[tuple[CountKey, int]]:
        """The counters of the servers ``only`` admits (calls with no server, such as
        a name that matched none, go with every reader), in a stable order."""
        return sorted(
            (key, n) for key, n in self.calls.items() if only is None or not key[0] or only(key[0])
        )


def render_call_metrics(
    counts: CallCounts, pending: int, only: Callable[[str], bool] | None = None
) -> list[str]:
    """The audit's families for ``GET /metrics``; ``pending``: calls waiting for a
    person's approval now."""
    out = Writer()
    name = "mcpd_calls_total"
    out.family(name, "counter", "Calls agents made, by server, method, outcome and decision.")
    for (server, method, outcome, decision), n in counts.samples(only):
        labels = {"server": server, "method": method, "outcome": outcome, "decision": decision}
        out.sample(name, labels, n)
    out.family("mcpd_approvals_pending", "gauge", "Calls waiting for a person's approval.")
    out.sample("mcpd_approvals_pending", {}, pending)
    if only is None:  # the daemon's own, for the owner's view
        out.family(
            "mcpd_audit_dropped_total",
            "counter",
            "Audit records not written because the writer fell behind.",
        )
        out.sample("mcpd_audit_dropped_total", {}, counts.dropped)
        out.family("mcpd_audit_write_errors_total", "counter", "Audit writes the file refused.")
        out.sample("mcpd_audit_write_errors_total", {}, counts.write_errors)
    return out.lines
