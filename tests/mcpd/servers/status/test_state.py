"""A server's state as people and models see it: the name ``mcpd status`` shows for what
its runner knows, the outage a call to it is told (with the line a dying child left),
the one-line summary ``mcpd status`` shows, and the one systemd shows every user."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from mcpd.registry.gating.limits import Trimmed
from mcpd.servers.circuit.breaker import Breaker, BreakerConfig
from mcpd.servers.life.backoff import BackoffConfig, RestartPolicy
from mcpd.servers.life.downtime import Downtime
from mcpd.servers.life.events import Failure, LifecycleJournal
from mcpd.servers.status.outage import Outage, iso_of_monotonic
from mcpd.servers.status.state import (
    Reported,
    counts,
    list_trims,
    outage_of,
    server_state,
    short_lists,
    states_summary,
    status_row,
)
from mcpd.servers.status.stats import LatencyStats


def downtime(*, process: bool = True, max_restarts: int = 3) -> Downtime:
    policy = RestartPolicy(BackoffConfig(jitter="none", max_restarts=max_restarts))
    return Downtime(LifecycleJournal("s", list), policy, lambda: None, process=process)


def breaker(threshold: int = 3) -> Breaker:
    return Breaker(BreakerConfig(failure_threshold=threshold, cooldown_base=5.0))


def reported(d: Downtime, b: Breaker, state: str = "ready") -> Reported:
    return Reported("s", state, "http", d, [], b, d.policy, LatencyStats(), 0, 0, [])


CRASH = Failure("outage", "exited with status 1", "the server exited (status 1)")
SPAWN = Failure("spawn_failed", "no such file", "command 'x' not found")


# -- the state's name --


async def test_a_connected_server_is_ready_then_degraded_then_open() -> None:
    d, b = downtime(), breaker(threshold=2)
    d.set_phase("connected")
    now = trio.current_time()
    assert server_state(d, b, now) == "ready"
    b.record_failure(now, "timed out")
    assert server_state(d, b, now) == "degraded"
    b.record_failure(now, "timed out")
    assert server_state(d, b, now) == "open"


async def test_calls_out_of_time_show_degraded_until_a_call_succeeds(
    autojump_clock: MockClock,
) -> None:
    """No failure of the server's, but no call has worked either: within
    ``stable_after``, the server shows it."""
    d, b = downtime(), breaker()
    d.set_phase("connected")
    b.record_timeout(trio.current_time(), "no answer within 1 s")
    assert server_state(d, b, trio.current_time()) == "degraded"
    b.record_success(trio.current_time())
    assert server_state(d, b, trio.current_time()) == "ready"
    b.record_timeout(trio.current_time(), "no answer within 1 s")
    await trio.sleep(d.policy.config.stable_after)
    assert server_state(d, b, trio.current_time()) == "ready"


async def test_a_circuit_closed_on_trial_shows_degraded(autojump_clock: MockClock) -> None:
    d, b = downtime(), breaker(threshold=1)
    d.set_phase("connected")
    b.record_failure(trio.current_time(), "HTTP 500")
    # Long after the failure, and past ``stable_after``: the trial is what shows.
    await trio.sleep(d.policy.config.stable_after + 5)
    assert server_state(d, b, trio.current_time()) == "half_open"
    b.record_heard(trio.current_time(), b.allow(trio.current_time()).ticket)
    assert server_state(d, b, trio.current_time()) == "degraded"
    b.record_success(trio.current_time())
    assert server_state(d, b, trio.current_time()) == "ready"


async def test_an_open_circuit_turns_half_open_when_its_cooldown_is_over(
    autojump_clock: MockClock,
) -> None:
    d, b = downtime(), breaker(threshold=1)
    d.set_phase("connected")
    b.record_failure(trio.current_time(), "reset")
    await trio.sleep(5.0)
    assert server_state(d, b, trio.current_time()) == "half_open"


async def test_a_child_that_keeps_dying_is_in_a_crash_loop() -> None:
    d = downtime(max_restarts=3)
    d.failed(CRASH, unreachable=False)
    assert server_state(d, breaker(), trio.current_time()) == "failed"
    d.failed(CRASH, unreachable=False)
    d.failed(CRASH, unreachable=False)
    assert server_state(d, breaker(), trio.current_time()) == "crash_loop"


async def test_a_command_that_cannot_start_has_failed_however_often() -> None:
    d = downtime(max_restarts=2)
    for _ in range(4):
        d.failed(SPAWN, unreachable=False)
    assert d.policy.in_crash_loop
    assert server_state(d, breaker(), trio.current_time()) == "failed"


async def test_a_server_that_could_not_be_reached_is_unreachable() -> None:
    d = downtime(process=False)
    d.failed(Failure("outage", "refused", "connection refused"), unreachable=True)
    assert server_state(d, breaker(), trio.current_time()) == "unreachable"


async def test_other_phases_are_their_own_state() -> None:
    for phase in ("starting", "idle", "stopped", "needs_login", "unresolved"):
        d = downtime()
        d.set_phase(phase)
        assert server_state(d, breaker(), trio.current_time()) == phase


# -- the outage a call is told --


async def test_a_failed_child_quotes_its_last_stderr_line() -> None:
    d = downtime()
    d.failed(CRASH, unreachable=False)
    now = trio.current_time()
    stderr = ["Traceback (most recent call last):", "  ...", "RuntimeError: no API_KEY", ""]
    got = outage_of("s", "failed", breaker(), d, now, stderr)
    assert (got.state, got.reason, got.stderr) == (
        "failed",
        "the server exited (status 1)",
        "RuntimeError: no API_KEY",
    )
    assert got.since == d.down_since and got.retry_at == d.retry_at


async def test_an_open_circuit_says_why_it_opened_and_when_it_tries_again() -> None:
    d, b = downtime(), breaker(threshold=1)
    now = trio.current_time()
    b.record_failure(now, "no answer within 60 s")
    got = outage_of("s", "open", b, d, now)
    assert (got.state, got.reason, got.since) == ("open", "no answer within 60 s", now)
    assert got.retry_at == now + 5.0


async def test_status_says_why_a_server_is_down_now_not_why_its_circuit_opened() -> None:
    d, b = downtime(process=False), breaker(threshold=1)
    d.set_phase("connected")
    b.record_failure(trio.current_time(), "HTTP 500 Internal Server Error")
    row = status_row(reported(d, b), era=None, version=None, tools=1, now=trio.current_time())
    assert row.last_error == "HTTP 500 Internal Server Error"
    # The server goes away while its circuit is open: the downtime says why now.
    d.failed(Failure("outage", "refused", "Connection refused"), unreachable=True)
    state = server_state(d, b, trio.current_time())
    row = status_row(
        reported(d, b, state), era=None, version=None, tools=1, now=trio.current_time()
    )
    assert (row.state, row.last_error) == ("unreachable", "Connection refused")
    assert row.since == iso_of_monotonic(d.down_since)
    assert row.retry_at == iso_of_monotonic(d.retry_at)


async def test_a_starting_server_says_what_its_last_attempt_met() -> None:
    d = downtime()
    now = trio.current_time()
    assert outage_of("s", "starting", breaker(), d, now).reason == "still starting"
    d.failed(CRASH, unreachable=False)
    assert outage_of("s", "starting", breaker(), d, now).reason == (
        "still starting (last error: the server exited (status 1))"
    )


async def test_a_stopped_server_has_no_retry_time() -> None:
    d = downtime()
    d.failed(CRASH, unreachable=False)
    d.set_phase("stopped", "stopped by a reload")
    got = outage_of("s", "stopped", breaker(), d, trio.current_time())
    assert (got.reason, got.retry_at) == ("stopped by a reload", None)
    assert outage_of("s", "stopped", breaker(), downtime(), 0.0).reason == "stopped"


async def test_any_other_state_says_its_last_error_or_not_running() -> None:
    now = trio.current_time()
    assert outage_of("s", "unreachable", breaker(), downtime(), now) == Outage(
        "s", "unreachable", "not running"
    )
    d = downtime()
    d.login_needed("run `mcpd auth login s`")
    got = outage_of("s", "needs_login", breaker(), d, now, ["ignored"])
    assert (got.reason, got.stderr) == ("run `mcpd auth login s`", None)


# -- summaries --


def test_the_summary_counts_each_state_and_names_the_servers_in_trouble() -> None:
    states = {"a": "ready", "b": "open", "c": "ready", "d": "idle", "e": "crash_loop"}
    assert states_summary(states) == "5 servers: 2 ready, 1 idle, 1 open (b), 1 crash_loop (e)"


def test_the_summary_names_three_servers_of_a_state_at_most() -> None:
    states = {alias: "failed" for alias in ("d", "a", "c", "b")}
    assert states_summary(states) == "4 servers: 4 failed (a, b, c, ...)"
    assert states_summary({"x": "needs_login"}) == "1 server: 1 needs_login (x)"
    assert states_summary({}) == "0 servers: none"


def test_the_line_for_systemd_counts_without_a_name_and_says_where_the_names_are() -> None:
    states = {"a": "ready", "billing": "unreachable", "c": "idle", "e": "crash_loop"}
    line = counts(states)
    assert line == (
        "4 servers: 1 ready, 1 idle, 1 unreachable, 1 crash_loop "
        "(mcpd status and the journal say which)"
    )
    assert "billing" not in line
    assert counts({"a": "ready", "b": "idle"}) == "2 servers: 1 ready, 1 idle"
    assert counts({}) == "0 servers: none"


def test_short_lists_name_the_lists_past_their_limits() -> None:
    assert short_lists(False, {}) == ""
    assert short_lists(False, {"prompts": Trimmed(dropped=["x: bad"])}) == ""
    said = short_lists(True, {"resources": Trimmed(past=3), "prompts": Trimmed(unread=True)})
    assert said == (
        "this server lists more tools, prompts, resources than mcpd's limits allow; "
        "only the first ones are shown"
    )


def test_list_trims_gather_what_each_list_left_out_and_cut() -> None:
    others = {
        "prompts": Trimmed(dropped=["p: malformed"], cut=["prompt q: description cut"]),
        "resource_templates": Trimmed(cut=["template t: description cut"]),
    }
    assert list_trims(["tool a: listed without its icons"], others, "instructions cut") == (
        ["p: malformed"],
        [],
        [],
        [
            "tool a: listed without its icons",
            "prompt q: description cut",
            "template t: description cut",
            "instructions cut",
        ],
    )
    assert list_trims([], {}, "").cut == []
