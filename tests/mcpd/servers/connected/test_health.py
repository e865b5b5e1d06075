"""Probing a connected server, on its own against a server the test plays: when a
probe is due, what each answer (a result, an error, nothing, a failure, a cancel, an
unreadable reply) means for the session and for the circuit breaker, what it settles
of the calls that ran out of time meanwhile, and when the server's task must look
again."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from mcpd.servers.circuit.breaker import Breaker, BreakerConfig
from mcpd.servers.connected.health import LIVENESS_TIMEOUT, Health
from mcpd.servers.life.backoff import RestartPolicy
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.parts.health_setup import Never, Setup
from transports.errors import HTTPStatusError, ServerCancelled, TransportClosed, TransportError


async def test_no_probe_is_due_without_a_check_or_a_suspicion() -> None:
    s = Setup()
    s.health.schedule()
    assert s.health.next_check == math.inf
    await s.tend()
    assert s.server.probes == 0


async def test_the_periodic_check_comes_within_a_tenth_of_its_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup(interval=100.0)
    for _ in range(20):
        s.health.schedule()
        assert 90.0 <= s.health.next_check - trio.current_time() <= 110.0
    await trio.sleep(111)
    await s.tend()
    assert s.server.probes == 1
    # Due again one interval on, not at once.
    await s.tend()
    assert s.server.probes == 1


async def test_a_suspect_server_that_answers_stays(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.health.suspect = True
    await s.tend()
    assert (s.server.probes, s.health.suspect) == (1, False)
    await s.tend()
    assert s.server.probes == 1


async def test_a_json_rpc_error_is_an_answer(autojump_clock: trio.testing.MockClock) -> None:
    s = Setup()
    s.server.answer = rpc.RPCError(rpc.INTERNAL_ERROR, "not now")
    s.health.suspect = True
    await s.tend()
    assert s.server.probes == 1


async def test_a_suspect_server_that_does_not_answer_is_gone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.server.answer = Never()
    s.health.suspect = True
    start = trio.current_time()
    with pytest.raises(TransportError) as info:
        await s.tend()
    assert trio.current_time() - start == pytest.approx(LIVENESS_TIMEOUT)
    assert info.value.reason == (
        f"s stopped responding (a probe got no answer in {LIVENESS_TIMEOUT:.0f} s)"
    )


async def test_a_failure_of_the_liveness_probe_is_raised_as_it_is(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.server.answer = gone = TransportClosed("s: the server exited")
    s.health.suspect = True
    with pytest.raises(TransportClosed) as info:
        await s.tend()
    assert info.value is gone


@pytest.mark.parametrize(
    "answer",
    [ServerCancelled("s cancelled the request"), MalformedReply("s: invalid UTF-8 in a reply")],
    ids=["cancelled by the server", "an unreadable reply"],
)
async def test_a_liveness_probe_the_server_cancels_or_garbles_was_answered(
    autojump_clock: trio.testing.MockClock, answer: Exception
) -> None:
    # The server is there: it read the probe and answered it, in its way.
    s = Setup()
    s.server.answer = answer
    s.health.suspect = True
    await s.tend()
    assert s.server.probes == 1


async def test_the_half_open_probe_closes_the_circuit_on_trial_on_an_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.open_breaker()
    await s.tend()
    assert s.server.probes == 0  # not before the cooldown
    await trio.sleep(10)
    await s.tend()
    assert s.server.probes == 1
    st = s.breaker.status(trio.current_time())
    # Closed, but only on trial: the server answered, and no call has gone through.
    assert (st.state, st.trial_since) == ("closed", trio.current_time())
    # Published as it started and as it ended.
    assert s.published == 2


@pytest.mark.parametrize(
    ("answer", "closes"),
    [
        (None, True),
        (rpc.RPCError(rpc.INTERNAL_ERROR, "oops"), True),
        (ServerCancelled("s cancelled the request"), True),
        (MalformedReply("s: invalid UTF-8 in a reply"), True),
        (Never(), False),
    ],
    ids=["a result", "an error", "a cancel", "an unreadable reply", "no answer"],
)
async def test_what_the_half_open_probes_answer_does_to_the_circuit(
    autojump_clock: trio.testing.MockClock, answer: Exception | Never | None, closes: bool
) -> None:
    s = Setup(probe_timeout=3.0)
    s.open_breaker()
    await trio.sleep(10)
    s.server.answer = answer
    start = trio.current_time()
    await s.tend()
    assert s.breaker.state == ("closed" if closes else "open")
    assert s.published == 2
    if isinstance(answer, Never):
        assert trio.current_time() - start == pytest.approx(3.0)
    if not closes:
        # Opened again: the next probe after a longer cooldown, not at once.
        await s.tend()
        assert s.server.probes == 1


async def test_a_half_open_probe_that_cannot_reach_the_server_ends_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As a liveness probe's failure does: the server is then shown unreachable and
    reconnected to on the backoff's delays, not kept open on the cooldown's."""
    s = Setup()
    s.open_breaker()
    await trio.sleep(10)
    s.server.answer = gone = TransportClosed("s: connection refused")
    with pytest.raises(TransportClosed) as info:
        await s.tend()
    assert info.value is gone
    assert s.breaker.status(trio.current_time()).reason == "s: connection refused"


@pytest.mark.parametrize("half_open", [True, False], ids=["half-open probe", "liveness probe"])
async def test_a_probe_answered_with_a_retry_after_holds_the_circuit_until_then(
    autojump_clock: trio.testing.MockClock, half_open: bool
) -> None:
    """The server said when to come back (503 with Retry-After): it is there, so the
    session goes on, and it is not asked again, by a call or a probe, before then."""
    s = Setup()
    if half_open:
        s.open_breaker()
        await trio.sleep(10)
    else:
        s.health.suspect = True
    s.server.answer = HTTPStatusError("s: HTTP 503", status=503, retry_after=600.0)
    await s.tend()
    now = trio.current_time()
    st = s.breaker.status(now)
    assert (st.state, st.retry_at, st.reason) == ("open", now + 600.0, "s: HTTP 503")
    assert s.breaker.allow(now).retry_at == now + 600.0
    await trio.sleep(599)
    await s.tend()
    assert s.server.probes == 1


async def test_calls_refused_while_the_half_open_probe_is_out_wait_for_its_own_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup(probe_timeout=3.0)
    s.open_breaker()
    await trio.sleep(10)
    s.server.answer = Never()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.tend)
        await trio.testing.wait_all_tasks_blocked()
        now = trio.current_time()
        refused = s.breaker.allow(now)
        nursery.cancel_scope.cancel()
    # The probe's bound, not the breaker's longest hold of a trial call.
    assert (refused.allowed, refused.retry_at) == (False, now + 3.0)


async def test_the_half_open_probe_goes_before_a_liveness_probe_and_answers_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.open_breaker()
    await trio.sleep(10)
    s.health.suspect = True
    await s.tend()
    assert (s.server.probes, s.health.suspect, s.breaker.state) == (1, False, "closed")


async def test_trouble_that_stops_showing_is_published_then_with_nothing_happening(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Degraded (a call failed, the circuit not open) for as long as trouble shows:
    the server's task wakes as that ends, and its state is published then."""
    s = Setup()
    s.breaker = Breaker(BreakerConfig(failure_threshold=5))
    s.health = Health(
        "s",
        s.breaker,
        interval=lambda: 0.0,
        probe_timeout=lambda: 3.0,
        on_probe=s._publish,
        answered_at=lambda: s.answered_at,
        trouble_shown=lambda: 30.0,
    )
    s.breaker.record_failure(trio.current_time(), "exited")
    start = trio.current_time()
    assert s.health.next_wake(RestartPolicy(), start) == start + 30.0
    await s.tend()
    assert s.published == 0
    await trio.sleep(30)
    await s.tend()
    assert s.published == 1
    # Once: nothing more to say, nor to wake for.
    await s.tend()
    assert s.published == 1
    assert s.health.next_wake(RestartPolicy(), trio.current_time()) == math.inf


async def test_a_server_that_answered_within_the_interval_is_not_probed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The periodic check is for an idle server: a busy one has just shown it is
    there, and its probe would wait behind its work."""
    s = Setup(interval=100.0)
    s.health.schedule()
    await trio.sleep(111)
    s.answered_at = trio.current_time() - 50
    await s.tend()
    assert s.server.probes == 0
    # Its next check is one interval on; idle by then, it is probed.
    await trio.sleep(111)
    await s.tend()
    assert s.server.probes == 1


async def test_a_half_open_probe_already_out_is_not_sent_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup(probe_timeout=30.0)
    s.open_breaker()
    await trio.sleep(10)
    s.server.answer = Never()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.tend)
        await trio.testing.wait_all_tasks_blocked()
        await s.tend()
        assert s.server.probes == 1
        nursery.cancel_scope.cancel()
    # The cancelled probe gave its slot back: the next one goes.
    s.server.answer = None
    await s.tend()
    assert s.server.probes == 2
    assert s.breaker.state == "closed"


@pytest.mark.parametrize(
    "answer", [None, rpc.RPCError(rpc.INTERNAL_ERROR, "not now")], ids=["result", "error"]
)
async def test_calls_out_of_time_are_no_failures_once_the_probe_they_ask_for_is_answered(
    autojump_clock: trio.testing.MockClock, answer: Exception | None
) -> None:
    s = Setup()
    s.server.answer = answer
    s.doubt()
    assert s.health.suspect and s.breaker.state == "closed"
    await s.tend()
    assert s.server.probes == 1
    st = s.breaker.status(trio.current_time())
    assert (st.state, st.total_failures) == ("closed", 0)
    # No failure, but trouble shown until a call succeeds.
    assert (st.trouble, st.trouble_at) == ("no answer within 2 s", trio.current_time())
    assert s.published == 1
    s.breaker.record_success(trio.current_time())
    assert s.breaker.status(trio.current_time()).trouble is None


@pytest.mark.parametrize("heard", [False, True], ids=["nothing", "something else"])
async def test_calls_out_of_time_count_unless_the_server_answers_anything_in_time(
    autojump_clock: trio.testing.MockClock, heard: bool
) -> None:
    s = Setup()
    s.doubt()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.health.judge)
        await trio.sleep(LIVENESS_TIMEOUT / 2)
        assert s.breaker.state == "closed"  # not yet judged
        if heard:
            s.answered_at = trio.current_time()  # another agent's call, say
        await trio.sleep(LIVENESS_TIMEOUT / 2)
        await trio.testing.wait_all_tasks_blocked()
        st = s.breaker.status(trio.current_time())
        nursery.cancel_scope.cancel()
    if heard:
        assert (st.state, st.total_failures) == ("closed", 0)
    else:
        assert (st.state, st.reason) == ("open", "no answer within 2 s")
        assert s.published == 1


@pytest.mark.parametrize(("answered", "state"), [(True, "closed"), (False, "open")])
async def test_a_half_open_trial_out_of_time_is_settled_by_what_the_server_answers(
    autojump_clock: trio.testing.MockClock, answered: bool, state: str
) -> None:
    s = Setup()
    s.open_breaker()
    await trio.sleep(10)
    s.doubt(trial=True)
    s.server.answer = None if answered else Never()
    if answered:
        await s.tend()
    else:
        with pytest.raises(TransportError):
            await s.tend()
        s.health.settle(s.answered_at)  # as the session ends
    # The probe that settled it was the liveness probe: no second one.
    assert s.server.probes == 1
    st = s.breaker.status(trio.current_time())
    assert (st.state, st.times_opened) == (state, 1 if answered else 2)
    # Its slot given back either way: once the circuit is half open again, a new
    # trial goes.
    await trio.sleep(30)
    assert s.breaker.allow(trio.current_time()).probe == (not answered)


async def test_calls_out_of_time_are_settled_once(autojump_clock: trio.testing.MockClock) -> None:
    s = Setup()
    s.doubt()
    s.health.settle(-math.inf)  # the session ended with nothing heard
    assert s.breaker.state == "open"
    s.health.settle(trio.current_time())
    assert s.breaker.status(trio.current_time()).total_failures == 1


async def test_the_next_wake_is_the_soonest_of_what_is_due(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    policy = RestartPolicy()
    now = trio.current_time()
    assert s.health.next_wake(policy, now) == math.inf
    s.health.next_check = now + 50
    assert s.health.next_wake(policy, now) == now + 50
    s.open_breaker()
    assert s.health.next_wake(policy, now) == now + 10
    # Past failures to forget: when the server counts as stable.
    policy.on_failure(now)
    policy.on_start(now)
    stable = policy.stable_at
    assert stable is not None
    assert s.health.next_wake(policy, now) == min(now + 10, stable)


@pytest.mark.parametrize("answered", [True, False], ids=["answers its probe", "answers nothing"])
async def test_a_request_of_the_servers_own_task_out_of_time_is_held_in_doubt_as_a_call(
    autojump_clock: trio.testing.MockClock, answered: bool
) -> None:
    """A list asked for again and not answered asks for a probe: a server that answers
    it was only slow to list, one that answers nothing opens the circuit."""
    s = Setup()
    if not answered:
        s.server.answer = Never()
    s.health.ran_out("tools/list got no answer within 2 s (the daemon's list_timeout)")
    assert s.health.suspect and s.breaker.state == "closed"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.health.judge)
        if answered:
            await s.tend()
        else:
            with pytest.raises(TransportError, match="stopped responding"):
                await s.tend()
        await trio.testing.wait_all_tasks_blocked()
        st = s.breaker.status(trio.current_time())
        nursery.cancel_scope.cancel()
    assert s.server.probes == 1
    if answered:
        assert (st.state, st.total_failures) == ("closed", 0)
    else:
        assert (st.state, st.reason) == (
            "open",
            "tools/list got no answer within 2 s (the daemon's list_timeout)",
        )
