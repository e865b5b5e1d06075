import msgspec
import pytest

from mcpd.servers.circuit.breaker import Breaker, BreakerConfig
from mcpd.servers.circuit.circuit_states import Admission, State, Transition

CFG = BreakerConfig(
    failure_threshold=3,
    cooldown_base=5.0,
    cooldown_factor=2.0,
    cooldown_cap=30.0,
    probe_timeout=10.0,
)


def make(config: BreakerConfig = CFG) -> tuple[Breaker, list[Transition]]:
    seen: list[Transition] = []
    return Breaker(config, on_transition=seen.append), seen


def state(b: Breaker) -> State:
    # A call, not the property, so mypy does not narrow it across the state changes.
    return b.state


def trip(b: Breaker, now: float, reason: str = "down") -> None:
    for _ in range(b.config.failure_threshold):
        b.record_failure(now, reason)


def probe(b: Breaker, now: float) -> Admission:
    adm = b.allow(now)
    assert adm.allowed and adm.probe
    return adm


def test_starts_closed_and_admits() -> None:
    b, seen = make()
    adm = b.allow(0.0)
    assert adm.allowed and adm.state == "closed" and not adm.probe
    assert state(b) == "closed"
    assert seen == []


def test_opens_exactly_at_threshold() -> None:
    b, seen = make()
    b.record_failure(1.0, "a")
    b.record_failure(2.0, "b")
    assert state(b) == "closed"
    assert b.allow(2.0).allowed
    b.record_failure(3.0, "connection refused")
    assert state(b) == "open"
    assert seen == [Transition("closed", "open", 3.0, "connection refused", 8.0)]
    adm = b.allow(3.5)
    assert not adm.allowed
    assert adm.state == "open"
    assert adm.reason == "connection refused"
    assert adm.since == 3.0
    assert adm.retry_at == 8.0


def test_success_resets_consecutive_count() -> None:
    b, _ = make()
    b.record_failure(1.0, "x")
    b.record_failure(2.0, "x")
    b.record_success(3.0)
    b.record_failure(4.0, "x")
    b.record_failure(5.0, "x")
    assert state(b) == "closed"
    st = b.status(5.0)
    assert st.consecutive_failures == 2
    assert st.total_failures == 4
    b.record_failure(6.0, "x")
    assert state(b) == "open"


def test_threshold_of_one() -> None:
    b, _ = make(BreakerConfig(failure_threshold=1))
    b.record_failure(0.0, "x")
    assert state(b) == "open"


def test_refuses_until_cooldown_then_half_open() -> None:
    b, seen = make()
    trip(b, 0.0)
    assert not b.allow(4.999).allowed
    assert state(b) == "open"
    adm = b.allow(5.0)
    assert adm.allowed and adm.probe and adm.state == "half_open"
    assert adm.since == 0.0
    assert [(t.old, t.new) for t in seen] == [("closed", "open"), ("open", "half_open")]
    assert seen[-1].at == 5.0


def test_half_open_admits_exactly_one_probe() -> None:
    b, _ = make()
    trip(b, 0.0, "timeout")
    p = probe(b, 5.0)
    for t in (5.0, 5.1, 9.9):
        other = b.allow(t)
        assert not other.allowed
        assert other.state == "half_open"
        assert other.reason == "timeout"
        assert other.since == 0.0
        assert other.retry_at == p.retry_at == 15.0


def test_probe_success_closes_and_resets() -> None:
    b, seen = make()
    trip(b, 0.0)
    p = probe(b, 5.0)
    b.record_success(6.0, p.ticket)
    assert state(b) == "closed"
    assert seen[-1] == Transition("half_open", "closed", 6.0, None, None)
    after = b.allow(6.0)
    assert after.allowed and not after.probe
    st = b.status(6.0)
    assert st.consecutive_failures == 0
    assert st.since is None and st.retry_at is None
    assert st.times_opened == 1
    # The cooldown starts from the base again after a successful close.
    trip(b, 10.0)
    assert b.allow(10.0).retry_at == 15.0


def test_probe_failure_reopens_with_longer_cooldown() -> None:
    b, seen = make()
    trip(b, 0.0, "first")
    p = probe(b, 5.0)
    b.record_failure(6.0, "still down", p.ticket)
    assert state(b) == "open"
    assert seen[-1] == Transition("half_open", "open", 6.0, "still down", 16.0)
    adm = b.allow(7.0)
    assert not adm.allowed
    assert adm.reason == "still down"
    assert adm.since == 0.0  # the outage began at the first open
    assert adm.retry_at == 16.0
    st = b.status(7.0)
    assert st.times_opened == 2
    assert st.consecutive_failures == 4


def test_cooldown_grows_and_caps() -> None:
    b, _ = make()
    trip(b, 0.0)
    now = 0.0
    cooldowns = []
    for _ in range(6):
        adm = b.allow(now)
        assert not adm.allowed and adm.retry_at is not None
        cooldowns.append(adm.retry_at - now)
        now = adm.retry_at
        p = probe(b, now)
        b.record_failure(now, "down", p.ticket)
    assert cooldowns == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    assert b.status(now).times_opened == 7


def test_an_answered_probe_closes_on_trial_and_the_first_failed_call_reopens_longer() -> None:
    """A server whose lists work and whose calls all fail: each probe it answers lets
    one call through, and the cooldown keeps growing, the outage keeping its start."""
    b, seen = make()
    trip(b, 0.0, "HTTP 500")
    now = 0.0
    cooldowns = []
    for _ in range(5):
        adm = b.allow(now)
        assert not adm.allowed and adm.retry_at is not None and adm.since == 0.0
        cooldowns.append(adm.retry_at - now)
        now = adm.retry_at
        b.record_heard(now, probe(b, now).ticket)
        assert seen[-1] == Transition("half_open", "closed", now, None, None, trial=True)
        st = b.status(now)
        assert (st.state, st.trial_since, st.trouble) == ("closed", now, "HTTP 500")
        call = b.allow(now)
        assert call.allowed and not call.probe
        b.record_failure(now + 1, "HTTP 500", call.ticket)
        now += 1
        assert state(b) == "open"
    assert cooldowns == [5.0, 10.0, 20.0, 30.0, 30.0]
    assert not any(t.new == "closed" and not t.trial for t in seen)


def test_a_call_that_succeeds_on_trial_is_the_recovery() -> None:
    b, seen = make()
    trip(b, 0.0)
    b.record_heard(5.0, probe(b, 5.0).ticket)
    b.record_success(6.0, b.allow(6.0).ticket)
    assert seen[-1] == Transition("closed", "closed", 6.0, None, None)
    st = b.status(6.0)
    assert (st.trial_since, st.since, st.trouble, st.consecutive_failures) == (None, None, None, 0)
    # The next outage's cooldown starts from the base again.
    trip(b, 10.0)
    assert b.allow(10.0).retry_at == 15.0


def test_a_connection_made_again_keeps_a_circuit_its_calls_opened_open() -> None:
    """Reported as of now (no ticket): the server answered its connection and its lists,
    which says nothing of calls that failed: the cooldown holds."""
    b, _ = make()
    trip(b, 0.0)
    b.record_heard(1.0)
    assert state(b) == "open" and b.allow(1.0).retry_at == 5.0
    # Its probe at the cooldown's end decides.
    b.record_heard(5.0, probe(b, 5.0).ticket)
    assert b.status(5.0).trial_since == 5.0


def test_a_connection_made_again_closes_a_circuit_opened_unreached_on_trial() -> None:
    """Opened as mcpd could not connect to the server (its probe was refused): a
    connection made again is its answer."""
    b, seen = make()
    for at in range(5):
        b.record_failure(float(at), "connection refused", unreached=True)
    b.record_heard(6.0)
    assert seen[-1] == Transition("open", "closed", 6.0, None, None, trial=True)
    b, seen = make()
    trip(b, 0.0)
    b.record_failure(5.0, "connection refused", probe(b, 5.0).ticket, unreached=True)
    b.record_heard(6.0)
    assert seen[-1] == Transition("open", "closed", 6.0, None, None, trial=True)
    assert b.status(6.0).trial_since == 6.0
    b.record_failure(7.0, "exited")
    assert state(b) == "open"
    # A closed circuit keeps its count: a server dying at each call still opens it.
    b, _ = make()
    for at in (1.0, 3.0):
        b.record_failure(at, "exited")
        b.record_heard(at + 1)
    b.record_failure(5.0, "exited")
    assert state(b) == "open"


def test_a_late_answer_to_a_stale_ticket_closes_nothing() -> None:
    b, _ = make()
    trip(b, 0.0)
    p = probe(b, 5.0)
    assert b.release_probe(p.ticket)
    b.record_heard(6.0, p.ticket)
    assert state(b) == "half_open"


def test_a_probe_admitted_with_a_shorter_hold_tells_refused_calls_that() -> None:
    b, _ = make()
    trip(b, 0.0)
    p = b.allow(5.0, expires_in=2.0)
    assert p.probe and p.retry_at == 7.0
    assert b.allow(6.0).retry_at == 7.0
    # Never longer than the breaker's own hold.
    b.release_probe(p.ticket)
    assert b.allow(8.0, expires_in=99.0).retry_at == 18.0


def test_a_call_out_of_time_is_trouble_but_no_failure() -> None:
    b, _ = make()
    b.record_timeout(1.0, "no answer within 2 s")
    st = b.status(1.0)
    assert (st.state, st.consecutive_failures, st.total_failures) == ("closed", 0, 0)
    assert (st.trouble, st.trouble_at) == ("no answer within 2 s", 1.0)
    b.record_success(2.0)
    assert b.status(2.0).trouble_at is None


def test_a_success_after_trouble_the_circuit_did_not_open_for_is_told() -> None:
    # Degraded, then ready: what status (and systemd's status line) shows changes,
    # though the circuit stays closed; a success after none is no news.
    b, seen = make()
    b.record_success(0.5)
    b.record_failure(1.0, "down")
    b.record_success(2.0)
    b.record_success(3.0)
    assert seen == [Transition("closed", "closed", 2.0, None, None, settled=True)]


def test_cooldown_growth_never_overflows() -> None:
    b, _ = make(BreakerConfig(failure_threshold=1, cooldown_factor=1e10, cooldown_cap=60.0))
    now = 0.0
    b.record_failure(now, "x")
    for _ in range(200):
        now += 60.0
        p = probe(b, now)
        b.record_failure(now, "x", p.ticket)
    assert b.allow(now).retry_at == now + 60.0


def test_abandoned_probe_expires() -> None:
    b, _ = make()
    trip(b, 0.0)
    first = probe(b, 5.0)
    assert not b.allow(14.9).allowed
    second = probe(b, 15.0)
    assert second.ticket != first.ticket
    # The first probe's late report is stale: it neither closes nor reopens the breaker.
    b.record_success(16.0, first.ticket)
    assert state(b) == "half_open"
    b.record_failure(16.0, "late", first.ticket)
    assert state(b) == "half_open"
    assert not b.allow(16.0).allowed
    b.record_success(17.0, second.ticket)
    assert state(b) == "closed"


def test_release_probe_frees_the_slot() -> None:
    b, seen = make()
    trip(b, 0.0)
    p = probe(b, 5.0)
    assert not b.allow(5.5).allowed
    assert b.release_probe(p.ticket)
    assert not b.release_probe(p.ticket)
    assert state(b) == "half_open"
    nxt = probe(b, 6.0)
    # Releasing is not an outcome: no transition, and the released ticket is stale.
    assert [(t.old, t.new) for t in seen] == [("closed", "open"), ("open", "half_open")]
    b.record_failure(6.5, "x", p.ticket)
    assert state(b) == "half_open"
    b.record_success(7.0, nxt.ticket)
    assert state(b) == "closed"


def test_release_after_outcome_is_a_no_op() -> None:
    b, _ = make()
    trip(b, 0.0)
    p = probe(b, 5.0)
    b.record_success(6.0, p.ticket)
    assert not b.release_probe(p.ticket)
    assert state(b) == "closed"
    assert not b.release_probe(b.allow(6.0).ticket)


def test_calls_from_before_the_open_cannot_change_state() -> None:
    b, _ = make()
    early = b.allow(0.0)
    trip(b, 1.0)
    b.record_success(2.0, early.ticket)
    assert state(b) == "open"
    b.record_failure(2.0, "late", early.ticket)
    p = probe(b, 6.0)
    b.record_success(6.5, early.ticket)
    b.record_failure(6.5, "late", early.ticket)
    assert state(b) == "half_open"
    b.record_success(7.0, p.ticket)
    assert state(b) == "closed"
    # Stale reports still show in the totals.
    st = b.status(7.0)
    assert st.total_failures == 5
    # A failure ticketed before the last close does not count towards the next open.
    for _ in range(b.config.failure_threshold):
        b.record_failure(8.0, "old", early.ticket)
    assert state(b) == "closed"


def test_untracked_reports_apply_to_current_state() -> None:
    b, _ = make()
    trip(b, 0.0)
    b.record_success(1.0)  # nothing can close an open breaker but a probe
    b.record_failure(1.0, "late")  # nor push its retry time out
    assert state(b) == "open"
    assert b.allow(1.0).retry_at == 5.0
    assert b.allow(1.0).reason == "down"
    b.allow(5.0)
    b.record_failure(5.5, "probe failed")
    assert state(b) == "open"
    b.allow(15.5)
    b.record_success(16.0)
    assert state(b) == "closed"


def test_poll_and_status_apply_due_transition_once() -> None:
    b, seen = make()
    trip(b, 0.0)
    assert b.poll(4.0) == "open"
    st = b.status(4.0)
    assert st.state == "open" and st.retry_at == 5.0 and st.reason == "down"
    assert b.poll(5.0) == "half_open"
    assert b.status(6.0).state == "half_open"
    assert b.status(6.0).retry_at is None  # no probe out: the next call is admitted
    assert [(t.old, t.new) for t in seen] == [("closed", "open"), ("open", "half_open")]
    assert b.allow(6.0).probe


def test_each_transition_reported_once() -> None:
    b, seen = make()
    trip(b, 0.0)
    for t in (1.0, 2.0, 3.0):
        b.allow(t)
    p = probe(b, 5.0)
    for t in (5.1, 5.2):
        b.allow(t)
    b.record_failure(6.0, "x", p.ticket)
    p = probe(b, 16.0)
    b.record_success(17.0, p.ticket)
    b.record_success(18.0)
    assert [(t.old, t.new) for t in seen] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


def test_works_without_callback() -> None:
    b = Breaker()
    for _ in range(5):
        b.record_failure(0.0, "x")
    assert state(b) == "open"
    assert b.allow(5.0).probe


def test_status_encodes_to_json() -> None:
    b, _ = make()
    trip(b, 0.0, "exit status 1")
    data = msgspec.json.decode(msgspec.json.encode(b.status(1.0)))
    assert data["state"] == "open"
    assert data["reason"] == "exit status 1"
    assert data["times_opened"] == 1


def test_config_decodes_from_toml_and_validates() -> None:
    cfg = msgspec.toml.decode(b"failure_threshold = 2\ncooldown_cap = 60.0\n", type=BreakerConfig)
    assert cfg.failure_threshold == 2 and cfg.cooldown_cap == 60.0
    with pytest.raises(msgspec.ValidationError):
        msgspec.toml.decode(b"failure_threshold = 0\n", type=BreakerConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.toml.decode(b"threshold = 2\n", type=BreakerConfig)
    for bad in (
        {"cooldown_base": 0.0},
        {"cooldown_factor": 0.5},
        {"cooldown_base": 10.0, "cooldown_cap": 5.0},
        {"probe_timeout": 0.0},
    ):
        with pytest.raises(ValueError):
            BreakerConfig(**bad)  # type: ignore[arg-type]


# -- a reload's new limits --


def test_a_new_threshold_counts_the_failures_already_met() -> None:
    b, _ = make()
    b.record_failure(0.0, "down")
    b.record_failure(1.0, "down")
    b.reconfigure(msgspec.structs.replace(CFG, failure_threshold=10))
    b.record_failure(2.0, "down")
    assert state(b) == "closed"
    assert b.status(2.0).consecutive_failures == 3
    b.reconfigure(msgspec.structs.replace(CFG, failure_threshold=4))
    b.record_failure(3.0, "down")
    assert state(b) == "open"


def test_new_cooldowns_take_over_as_far_grown_as_the_old_ones_were() -> None:
    b, _ = make()
    trip(b, 0.0)
    assert b.allow(1.0).retry_at == 5.0  # the cooldown under way keeps its end
    b.reconfigure(msgspec.structs.replace(CFG, cooldown_base=30.0, cooldown_cap=50.0))
    assert b.allow(1.0).retry_at == 5.0
    p = probe(b, 5.0)
    b.record_failure(5.0, "still down", p.ticket)
    # The second open: twice the base, within the new cap.
    assert b.allow(6.0).retry_at == 55.0
    assert b.status(6.0).times_opened == 2


def test_a_lower_cap_bounds_the_next_cooldown() -> None:
    b, _ = make()
    trip(b, 0.0)
    for now in (5.0, 15.0, 35.0):
        b.record_failure(now, "down", probe(b, now).ticket)
    b.reconfigure(msgspec.structs.replace(CFG, cooldown_cap=8.0))
    b.record_failure(65.0, "down", probe(b, 65.0).ticket)
    assert b.allow(66.0).retry_at == 73.0


# -- a server that says when to come back --


def test_a_server_given_wait_opens_the_circuit_at_once_until_then() -> None:
    b, seen = make()
    b.hold_open(0.0, 120.0, "HTTP 429", b.allow(0.0).ticket)
    assert state(b) == "open"
    assert seen == [Transition("closed", "open", 0.0, "HTTP 429", 120.0)]
    adm = b.allow(60.0)
    assert not adm.allowed and adm.retry_at == 120.0 and adm.reason == "HTTP 429"
    assert b.status(60.0).consecutive_failures == 1
    assert b.allow(120.0).probe


def test_a_wait_shorter_than_the_cooldown_does_not_shorten_it() -> None:
    b, _ = make()
    b.hold_open(0.0, 1.0, "HTTP 503")
    assert b.allow(2.0).retry_at == 5.0


def test_a_wait_keeps_an_open_circuit_open_longer_whenever_its_call_began() -> None:
    b, _ = make()
    stale = b.allow(0.0).ticket
    trip(b, 0.0)
    b.hold_open(1.0, 300.0, "HTTP 429", stale)
    assert b.allow(10.0).retry_at == 300.0
    assert b.status(10.0).times_opened == 1
    b.hold_open(11.0, 200.0, "HTTP 429")
    assert b.allow(12.0).retry_at == 300.0


def test_a_half_open_probe_told_to_wait_reopens_until_then() -> None:
    b, _ = make()
    trip(b, 0.0)
    p = probe(b, 5.0)
    b.hold_open(6.0, 1000.0, "HTTP 503", p.ticket)
    assert state(b) == "open"
    assert b.allow(7.0).retry_at == 1000.0


def test_a_reset_closes_a_held_circuit_on_trial_and_keeps_the_outage() -> None:
    """A person's word ends a wait the server asked for: the next call decides, and a
    failure opens it again at once, with the cooldown grown as before."""
    b, seen = make()
    b.hold_open(1.0, 86_401.0, "HTTP 429")
    assert b.reset(2.0)
    assert seen[-1] == Transition("open", "closed", 2.0, None, None, trial=True, asked=True)
    st = b.status(2.0)
    assert (st.trial_since, st.since) == (2.0, 1.0)
    b.record_failure(3.0, "HTTP 429")
    assert state(b) == "open" and b.allow(3.0).retry_at == 13.0
    # A closed circuit is left alone.
    b, seen = make()
    assert not b.reset(1.0) and seen == []
