"""One audit record: its time as ``iso`` and ``stamp`` write it (the same text as
datetime's, across second, day and year boundaries and out of order), the digest of the
arguments, and the line a record and a gap become."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpd.audit.record import DIGEST, CallRecord, Gap, digest, iso, set_digests, stamp
from mcpd.policy.agent import AgentInfo


def as_datetime_writes(ts: float) -> str:
    """What datetime makes of ``ts``, cut to the millisecond."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def record(ts: float, **kw: object) -> CallRecord:
    return msgspec.convert(
        {"ts": ts, "agent": {"pid": 7}, "method": "tools/call", "outcome": "ok", **kw},
        CallRecord,
    )


@pytest.mark.parametrize(
    "ts",
    [
        0.0,
        1_785_000_000.0,
        1_785_000_000.0005,  # half a millisecond: cut, not rounded
        1_785_000_000.9999994,  # a hair under the next second's microsecond
        1_785_000_000.9999996,  # rounds to the next second, as datetime does
        1_798_761_599.9995,  # the last millisecond of 2026
        1_798_761_599.9999999,  # rounds into 2027
        -1.5,  # before 1970 (a clock set wrong)
        -0.0004,
        # Its microseconds are 744999.41: times a million, the float nearest it ends in .5
        1_854_274_542.7449994,
    ],
)
def test_the_time_is_written_as_datetime_writes_it(ts: float) -> None:
    assert iso(ts) == as_datetime_writes(ts)


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
def test_any_time_is_written_as_datetime_writes_it(ts: float) -> None:
    assert iso(ts) == as_datetime_writes(ts)


def test_a_batch_is_stamped_each_by_its_own_time_in_any_order() -> None:
    times = [
        1_785_000_000.001,
        1_785_000_000.999,
        1_785_000_001.0,
        1_785_000_000.5,  # earlier than the one before: the writer takes them as they come
        1_798_761_599.9999999,
        1_785_000_000.5,
    ]
    records = [record(ts) for ts in times]
    stamp(records)
    assert [r.time for r in records] == [as_datetime_writes(ts) for ts in times]


def test_the_digest_is_of_the_bytes_as_the_agent_sent_them() -> None:
    spaced, compact = b'{"a": 1}', b'{"a":1}'
    assert digest(spaced) == hashlib.sha256(spaced).hexdigest()[:DIGEST]
    assert digest(msgspec.Raw(spaced)) == digest(spaced)
    assert digest(spaced) != digest(compact)
    assert len(digest(b"")) == DIGEST


def test_a_record_without_arguments_leaves_them_out_of_its_line() -> None:
    r = record(1_785_000_000.25, name="delete_repo", server="gh", outcome="refused")
    stamp([r])
    line = json.loads(msgspec.json.encode(r))
    assert "arguments" not in line
    assert line["time"] == "2026-07-25T17:20:00.250Z"
    assert line["agent"]["pid"] == 7 and line["outcome"] == "refused"
    assert r.failed
    assert not record(0.0).failed


def test_arguments_kept_are_written_as_given_even_when_null() -> None:
    line = json.loads(msgspec.json.encode(record(0.0, arguments=None)))
    assert "arguments" in line and line["arguments"] is None


def test_a_record_reads_back_as_it_was_written() -> None:
    r = record(
        1_785_000_000.0,
        agent=msgspec.to_builtins(AgentInfo(uid=1000, pid=7, exe="claude", connection="c")),
        name="q",
        arguments={"k": [1, "two"]},
        decision="approved",
        decided_by="the agent's user",
        duration_ms=12.5,
    )
    back = msgspec.json.decode(msgspec.json.encode(r), type=CallRecord)
    assert back == r


def test_a_gap_says_how_many_records_were_never_written() -> None:
    line = json.loads(msgspec.json.encode(Gap(time=iso(0.0), ts=0.0, dropped=12)))
    assert line == {"time": "1970-01-01T00:00:00.000Z", "ts": 0.0, "dropped": 12}


@given(st.lists(st.binary(max_size=2048), max_size=20))
def test_a_batchs_digests_are_each_records_own(arguments: list[bytes]) -> None:
    records = [record(float(n)) for n in range(len(arguments))]
    set_digests(records, arguments)
    assert [r.args_digest for r in records] == [digest(a) for a in arguments]
    assert all(len(r.args_digest or "") == DIGEST for r in records)


def test_a_summary_says_how_many_and_until_when_and_a_record_stands_for_one() -> None:
    summary = record(
        1_785_000_000.0,
        name="x",
        outcome="refused",
        count=5000,
        last_ts=1_785_000_003.5,
        last_time=iso(1_785_000_003.5),
    )
    line = json.loads(msgspec.json.encode(summary))
    assert (line["count"], line["last_ts"], line["last_time"]) == (
        5000,
        1_785_000_003.5,
        "2026-07-25T17:20:03.500Z",
    )
    assert msgspec.json.decode(msgspec.json.encode(summary), type=CallRecord).calls == 5000
    one = json.loads(msgspec.json.encode(record(0.0)))
    assert not {"count", "last_ts", "last_time"} & one.keys()
    assert record(0.0).calls == 1
