"""What ``mcpd bridge`` has asked and not heard back (``OpenRelays``, ``OwnRequests``):
each host's request taken once, by its answer or its connection's end; whether calls
still wait; and the bridge's own ids kept clear of the host's."""

from __future__ import annotations

from mcpd.agents.bridge.ledger import LISTEN, OpenRelays, OwnRequests

FIRST = object()
SECOND = object()


def test_a_request_is_taken_once() -> None:
    ledger = OpenRelays()
    ledger.add(FIRST, [1, "a"], "tools/call")
    assert 1 in ledger and "a" in ledger
    assert ledger.take(1)
    assert not ledger.take(1)
    assert 1 not in ledger
    assert not ledger.take("never")


def test_an_id_already_waiting_keeps_its_first_connection() -> None:
    ledger = OpenRelays()
    ledger.add(FIRST, [7], "tools/call")
    ledger.add(SECOND, [7], "tools/call")
    assert ledger.take_all(SECOND) == []
    assert ledger.take_all(FIRST) == [7]
    # Counted once: with it taken, no call waits.
    assert ledger.calls_answered.is_set()


def test_calls_answered_is_set_only_while_no_call_waits() -> None:
    ledger = OpenRelays()
    assert ledger.calls_answered.is_set()
    ledger.add(FIRST, [1, 2], "tools/call")
    waiting = ledger.calls_answered
    assert not waiting.is_set()
    ledger.take(1)
    assert not waiting.is_set()
    ledger.take(2)
    assert waiting.is_set()
    # Another call makes a new event to wait on; the one set stays set.
    ledger.add(FIRST, [3])
    assert waiting.is_set() and not ledger.calls_answered.is_set()


def test_listens_stay_open_and_keep_no_one_waiting_for_calls() -> None:
    ledger = OpenRelays()
    ledger.add(FIRST, ["L"], LISTEN)
    assert ledger.calls_answered.is_set()
    assert ledger.listens() == ["L"]
    ledger.add(FIRST, [1], "tools/call")
    assert ledger.listens() == ["L"]
    assert ledger.take("L")
    assert not ledger.calls_answered.is_set()
    assert ledger.listens() == []


def test_a_connection_gone_takes_its_requests_only_in_a_stable_order() -> None:
    ledger = OpenRelays()
    ledger.add(FIRST, [10, "b", 2], "tools/call")
    ledger.add(SECOND, [3], "tools/call")
    ledger.add(FIRST, ["L"], LISTEN)
    assert ledger.take_all(FIRST) == [10, 2, "L", "b"]
    assert [rid in ledger for rid in (10, "b", 2, "L", 3)] == [False] * 4 + [True]
    assert not ledger.calls_answered.is_set()
    assert ledger.take_all(SECOND) == [3]
    assert ledger.calls_answered.is_set()


def test_the_bridges_own_ids_skip_those_the_host_has_waiting() -> None:
    host = OpenRelays()
    host.add(FIRST, ["mcpd-bridge-1", "mcpd-bridge-3"], "tools/call")
    own = OwnRequests()
    assert own.new("mcpd/lineLimit", host) == "mcpd-bridge-2"
    assert own.new("tools/list", host) == "mcpd-bridge-4"
    assert "mcpd-bridge-2" in own and "mcpd-bridge-1" not in own


def test_an_own_answer_names_its_method_once() -> None:
    own = OwnRequests()
    rid = own.new("tools/list", OpenRelays())
    assert own.answered(rid) == "tools/list"
    assert own.answered(rid) is None
    assert own.answered("host-id") is None


def test_forgotten_own_requests_answer_nothing() -> None:
    own = OwnRequests()
    first = own.new("a", OpenRelays())
    own.forget()
    assert first not in own
    assert own.answered(first) is None
    # New ids never repeat one given before.
    assert own.new("b", OpenRelays()) != first
