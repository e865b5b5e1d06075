"""A full audit buffer: a record that comes when it is full takes the place of the
newest record of the agent holding the most, unless its own agent holds the most (or
as many), and then it is the one dropped. An agent flooding the log loses its own
records; one calling at its usual pace loses none."""

from __future__ import annotations

from mcpd.audit.record import CallRecord
from mcpd.audit.shares import Shares
from mcpd.policy.agent import AgentInfo

A = AgentInfo(uid=1000, pid=1, exe="flood")
B = AgentInfo(uid=1000, pid=2, exe="claude")
C = AgentInfo(uid=1001, pid=3, exe="codex")


def rec(agent: AgentInfo, n: int) -> CallRecord:
    return CallRecord(ts=float(n), agent=agent, method="tools/call", name=f"t{n}", outcome="ok")


def names(buffer: list[CallRecord]) -> list[str]:
    return [f"{r.agent.exe}:{r.name}" for r in buffer]


def admit(shares: Shares, buffer: list[CallRecord], record: CallRecord) -> bool:
    """As the log does: appended when there is room for it."""
    if shares.make_room(record):
        buffer.append(record)
        return True
    return False


def test_the_agent_holding_the_most_gives_up_its_newest() -> None:
    buffer = [rec(A, 0), rec(B, 1), rec(A, 2), rec(A, 3), rec(C, 4)]
    shares = Shares(buffer)
    assert admit(shares, buffer, rec(B, 5))
    assert names(buffer) == ["flood:t0", "claude:t1", "flood:t2", "codex:t4", "claude:t5"]
    assert admit(shares, buffer, rec(C, 6))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t4", "claude:t5", "codex:t6"]
    # An agent holding as many as any other is the one that gives up its place.
    assert not admit(shares, buffer, rec(B, 7))
    assert not admit(shares, buffer, rec(C, 8))
    assert admit(shares, buffer, rec(A, 9))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t4", "codex:t6", "flood:t9"]


def test_a_flood_loses_its_own_records_and_a_trickle_none() -> None:
    buffer = [rec(A, n) for n in range(100)]
    shares = Shares(buffer)
    kept = []
    for n in range(100, 1100):
        if n % 50 == 0:
            kept.append(admit(shares, buffer, rec(B, n)))
        else:
            assert not admit(shares, buffer, rec(A, n))
    assert kept == [True] * 20
    assert len(buffer) == 100
    assert [r.name for r in buffer if r.agent == B] == [f"t{n}" for n in range(100, 1100, 50)]
    assert [r.name for r in buffer if r.agent == A] == [f"t{n}" for n in range(80)]


def test_a_newcomer_with_no_record_yet_takes_a_place() -> None:
    buffer = [rec(A, 0), rec(B, 1), rec(A, 2)]
    shares = Shares(buffer)
    assert admit(shares, buffer, rec(C, 3))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t3"]
