"""A full audit buffer: a record that comes when it is full takes the place of the
newest record of the user (uid) holding the most, of that user's process holding the
most; when its own user holds the most (or as many), of its user's process holding the
most, unless that is its own (or its own holds as many), and then it is the one
dropped. A user flooding the log loses its own records, over however many processes;
an agent calling at its usual pace loses none."""

from __future__ import annotations

import pytest

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


def test_the_user_holding_the_most_gives_up_the_newest_of_its_process_holding_the_most() -> None:
    buffer = [rec(A, 0), rec(B, 1), rec(A, 2), rec(A, 3), rec(C, 4)]
    shares = Shares(buffer)
    # Within the user holding the most: its process holding the most gives way.
    assert admit(shares, buffer, rec(B, 5))
    assert names(buffer) == ["flood:t0", "claude:t1", "flood:t2", "codex:t4", "claude:t5"]
    assert admit(shares, buffer, rec(C, 6))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t4", "claude:t5", "codex:t6"]
    # A process holding the most of its user's (or as many) is the one that gives way.
    assert not admit(shares, buffer, rec(B, 7))
    # Another user's record still takes a place: its user holds fewer.
    assert admit(shares, buffer, rec(C, 8))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t4", "codex:t6", "codex:t8"]
    # Now its user holds the most, and it is its user's only process.
    assert not admit(shares, buffer, rec(C, 9))
    assert admit(shares, buffer, rec(A, 10))
    assert names(buffer) == ["flood:t0", "claude:t1", "codex:t4", "codex:t6", "flood:t10"]


def flooded(processes: int, honest: AgentInfo, capacity: int = 1000) -> list[CallRecord]:
    """A full buffer that one user (uid 1000) keeps filling from ``processes`` processes
    in turn, while ``honest`` makes 40 calls: what the buffer holds of ``honest``'s."""
    buffer: list[CallRecord] = []
    flood = [AgentInfo(uid=1000, pid=10_000 + n, exe="python3") for n in range(processes)]
    shares: Shares | None = None
    for n in range(capacity * 2):
        records = [rec(flood[n % processes], n)]
        if n == capacity + 100:  # the honest agent's burst, among the flood's
            records += [rec(honest, n) for _ in range(40)]
        for record in records:
            if len(buffer) < capacity:
                buffer.append(record)
                continue
            shares = shares or Shares(buffer)
            admit(shares, buffer, record)
    return [r for r in buffer if r.agent == honest]


@pytest.mark.parametrize("processes", [1, 100, 400, 1000])
def test_a_flood_spread_over_many_processes_costs_another_users_agent_nothing(
    processes: int,
) -> None:
    assert len(flooded(processes, C)) == 40


def test_an_agent_of_the_flooding_user_keeps_its_records_while_each_of_the_flood_holds_more() -> (
    None
):
    assert len(flooded(10, B)) == 40


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
