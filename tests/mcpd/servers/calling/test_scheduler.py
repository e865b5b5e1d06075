"""A server's call scheduler on its own, under trio's virtual clock: a call is sent while a
slot is free and queued (up to the queue's size, each agent taking its turn) when none
is; a call that waits or runs too long ends with a reason that names the limit to raise; each way a
call can fail becomes the outcome an agent is told, counted against the server or not;
and a cancelled call gives its slot to the next one."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw
from trio.testing import MockClock

from mcpd.config.loading.load import parse_config
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.asking.askback import AskRoutes
from mcpd.servers.asking.progress import ProgressRoutes
from mcpd.servers.calling.calls import Call, CallLimits, QueuedCheck, Whose
from mcpd.servers.calling.scheduler import CallScheduler
from mcpd.servers.circuit.breaker import Breaker
from mcpd.servers.connected.health import Health
from mcpd.servers.life.backoff import RestartPolicy
from mcpd.servers.life.downtime import Downtime
from mcpd.servers.life.events import LifecycleJournal
from mcpd.servers.life.lazy_state import Demand
from mcpd.servers.life.standing import Standing
from mcpd.servers.lists.rediscovery import Rediscovery
from mcpd.servers.oauth import LoginRequired
from mcpd.servers.results.taking_apart import AT_ONCE_PARTS, MOST_PARTS, ReplyWork
from mcpd.servers.shared import AgentKey
from mcpd.servers.status.outage import Outage
from mcpd.servers.status.state import backoff_config, breaker_config
from mcpd.servers.status.stats import LatencyStats
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.mcp import core as mcp
from tests.support.parts.calls import SOMEONE, Outcomes, a_call
from tests.support.parts.held_walk import Held, hold
from transports.errors import ServerCancelled, TransportError

LIMIT = 30.0
MIB = 1024 * 1024
RESULT = Raw(b'{"content":[]}')


class Host:
    """The server's side of its scheduler: a standing made of real parts, as a server's
    parts make it, with a phase the test sets and nothing running to change it."""

    def __init__(self, kind: str, server: dict[str, Any], daemon: dict[str, Any]) -> None:
        config = parse_config(
            {"daemon": daemon, "servers": {"s": {"command": "x", **server}}}, env={}
        )
        self.breaker = Breaker(breaker_config(config.daemon, probe_timeout=5.0))
        self.stats = LatencyStats()
        self.guard = SecretGuard(KnownSecrets())
        self.progress = ProgressRoutes("mcpd-s-")
        self.asks = AskRoutes("s", lambda: 60.0)
        self.replies = ReplyWork("s", self.guard)
        self.wakes = 0
        policy = RestartPolicy(backoff_config(config.daemon))
        self.downtime = Downtime(
            LifecycleJournal("s", lambda: []), policy, lambda: None, process=kind == "stdio"
        )
        self.health = Health(
            "s",
            self.breaker,
            interval=lambda: 0.0,
            probe_timeout=lambda: 5.0,
            on_probe=lambda: None,
            answered_at=lambda: -math.inf,
            trouble_shown=lambda: 30.0,
        )
        catalog = Catalog(config.naming)
        self.rediscovery = Rediscovery("s", catalog.gate)
        self.standing = Standing(
            "s",
            guard=self.guard,
            breaker=self.breaker,
            stats=self.stats,
            limits=CallLimits("s", config),
            transport_kind=kind,
            downtime=self.downtime,
            lazy=None,
            health=self.health,
            rediscovery=self.rediscovery,
            registry=catalog,
            wake=self._wake,
            on_change=lambda alias: None,
        )

    def _wake(self) -> None:
        self.wakes += 1

    @property
    def failures(self) -> int:
        """The availability failures counted against the server."""
        return self.breaker.status(trio.current_time()).total_failures

    def connected(self) -> None:
        self.downtime.set_phase("connected")

    def starting(self) -> None:
        """Its first start under way: calls wait for it."""
        self.downtime.set_phase("starting")

    def stopped(self) -> None:
        self.downtime.set_phase("stopped", "the server is not running")

    def outage(self) -> Outage:
        return self.standing.outage()


class Server:
    """The upstream a scheduler hands calls to: what it was sent and told to drop."""

    era = "legacy"

    def __init__(self) -> None:
        # Its transport: a failure it ended with (a process gone) is its error.
        self.transport = SimpleNamespace(error=None)
        self.sent: list[Call] = []
        self.forgotten: list[tuple[Call, str]] = []
        self.refuse: BaseException | None = None

    def start(self, call: Call) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append(call)

    def forget(self, call: Call, why: str) -> None:
        self.forgotten.append((call, why))


class Agent:
    """A legacy agent, as what its server asks back reaches it."""

    direct = True

    def __init__(self) -> None:
        self.owner = self
        self.asked: list[object] = []

    async def ask(self, method: str, params: object) -> object:
        self.asked.append(params)
        return {"action": "accept", "content": {}}


class Bench:
    def __init__(self, host: Host, scheduler: CallScheduler, server: Server) -> None:
        self.host = host
        self.scheduler = scheduler
        self.server = server

    def call(
        self, name: str = "t", *, timeout: float = 0.0, by: Agent | None = None
    ) -> tuple[Call, Outcomes]:
        call, outcomes = a_call(name, timeout=timeout)
        if by is not None:
            call.asker = call.owner = by
        self.scheduler.start(call)
        return call, outcomes

    def answer(self, call: Call, raw: Raw | None, error: BaseException | None = None) -> None:
        call(raw, error)  # as a transport hands a call its answer

    @property
    def sent(self) -> list[str]:
        return [c.name for c in self.server.sent]


def bench_maker(
    nursery: trio.Nursery,
) -> Callable[..., Bench]:
    def make(
        *,
        limit: int = 2,
        kind: str = "stdio",
        attached: bool = True,
        server: dict[str, Any] | None = None,
        **daemon: Any,
    ) -> Bench:
        host = Host(kind, server or {}, daemon)
        scheduler = CallScheduler(
            host.standing,
            progress=host.progress,
            asks=host.asks,
            replies=host.replies,
            limit=limit,
        )
        upstream = Server()
        if attached:
            host.connected()
            host.standing.upstream = upstream  # type: ignore[assignment]
            scheduler.attach(upstream)  # type: ignore[arg-type]
        else:
            host.stopped()
        nursery.start_soon(scheduler.run_timer)
        nursery.start_soon(host.replies.run)
        return Bench(host, scheduler, upstream)

    return make


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Bench]]:
    """Each test asks for ``autojump_clock`` too: the clock a test runs on is one of
    its own arguments."""
    async with trio.open_nursery() as nursery:
        yield bench_maker(nursery)
        nursery.cancel_scope.cancel()


async def outcome_of(outcomes: Outcomes) -> object:
    with trio.fail_after(LIMIT * 100):  # virtual time: the limits tested run out first
        await outcomes.arrived.wait()
    return outcomes.outcome


def outage(outcomes: Outcomes) -> Outage:
    assert isinstance(outcomes.outcome, Outage), outcomes.outcome
    return outcomes.outcome


# -- admission --


async def test_a_call_is_sent_at_once_and_its_answer_delivered(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call()
    assert b.sent == ["t"] and call.state == "running"
    b.answer(call, RESULT)
    assert outcomes.outcome == RESULT
    assert b.scheduler.running == 0
    assert (b.host.stats.calls, b.host.stats.errors) == (1, 0)


async def test_a_result_that_goes_on_as_it_came_carries_the_head_read_of_it(
    make: Any, autojump_clock: MockClock
) -> None:
    """The scheduler reads a result's head once, and hands it on with the call for the
    agent side to shape the result by; a result whose bytes are changed (a key of
    mcpd's own dropped) carries none, so nothing is shaped by what it no longer says."""
    b = make()
    call, outcomes = b.call()
    b.answer(call, Raw(b'{"content":[{"type":"text","text":"hi"}],"isError":true}'))
    assert call.head is not None and call.head.isError is True
    assert [block.type for block in call.head.content or ()] == ["text"]
    again, outcomes = b.call()
    b.answer(again, Raw(b'{"content":[],"_meta":{"mcpd/x":1,"k":2}}'))
    assert outcomes.outcome == Raw(b'{"content":[],"_meta":{"k":2}}')
    assert again.head is None


async def test_calls_past_the_limit_wait_in_order_for_a_slot(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=2)
    calls = [b.call(f"c{i}") for i in range(4)]
    assert b.sent == ["c0", "c1"]
    assert [c.state for c, _ in calls] == ["running", "running", "queued", "queued"]
    b.answer(calls[1][0], RESULT)
    assert b.sent == ["c0", "c1", "c2"]
    b.answer(calls[0][0], RESULT)
    assert b.sent == ["c0", "c1", "c2", "c3"]


async def test_a_full_queue_refuses_at_once_and_says_how_many_wait(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=1, queue_size=2)
    b.call("running")
    b.call("q1")
    b.call("q2")
    _, refused = b.call("over")
    assert outage(refused).state == "busy"
    assert outage(refused).reason == "2 calls already waiting for this server"
    assert b.sent == ["running"]


async def test_one_agent_filling_the_queue_is_refused_its_own_calls_not_anothers(
    make: Any, autojump_clock: MockClock
) -> None:
    """The queue is one server's for every agent: one that fills it has its newest
    queued call make room for another agent's, so the others are not all turned away
    while it keeps calling."""
    b = make(limit=1, queue_size=4)
    flood, other = AgentKey(), AgentKey()

    def call_of(owner: AgentKey, name: str) -> Outcomes:
        call, outcomes = a_call(name)
        call.owner = owner
        b.scheduler.start(call)
        return outcomes

    call_of(flood, "running")
    queued = [call_of(flood, f"f{i}") for i in range(4)]
    mine = call_of(other, "mine")
    assert not mine.arrived.is_set()  # it waits, in the flood's newest place
    assert outage(queued[-1]).state == "busy"
    assert not any(q.arrived.is_set() for q in queued[:-1])
    again = call_of(flood, "f4")  # its own next call is its own to lose
    assert outage(again).reason == "4 calls already waiting for this server"
    assert [c.name for c in b.scheduler.queue] == ["f0", "f1", "f2", "mine"]
    # An agent holding as many as the most, its call counted, is refused as before.
    call_of(other, "mine2")
    assert [c.name for c in b.scheduler.queue] == ["f0", "f1", "mine", "mine2"]
    assert outage(call_of(other, "mine3")).state == "busy"


async def test_a_freed_slot_goes_to_the_agent_whose_turn_it_is_not_the_first_queued(
    make: Any, autojump_clock: MockClock
) -> None:
    """One agent that queued many long calls does not hold another's call behind all
    of them: each agent with calls waiting takes a turn at the slots as they free."""
    b = make(limit=2)
    busy, other = AgentKey(), AgentKey()

    def call_of(owner: AgentKey, name: str) -> Call:
        call, _ = a_call(name)
        call.owner = owner
        b.scheduler.start(call)
        return call

    running = [call_of(busy, f"b{i}") for i in range(2)]
    for i in range(2, 6):
        call_of(busy, f"b{i}")
    mine = call_of(other, "mine")
    mine2 = call_of(other, "mine2")
    b.answer(running[0], RESULT)
    assert b.sent == ["b0", "b1", "mine"]
    b.answer(running[1], RESULT)
    assert b.sent[-1] == "b2"  # then the busy agent's turn
    b.answer(mine, RESULT)
    assert b.sent[-1] == "mine2"
    b.answer(mine2, RESULT)
    assert b.sent[-1] == "b3"  # the other has nothing waiting: the rest in order
    assert [c.name for c in b.scheduler.queue] == ["b4", "b5"]


def big(mib: int) -> Raw:
    """Arguments of some ``mib`` MiB."""
    return Raw(b'{"text":"' + b"x" * (mib * MIB) + b'"}')


def start(b: Bench, name: str, arguments: Raw, whose: Whose = SOMEONE) -> tuple[Call, Outcomes]:
    call, outcomes = a_call(name, arguments, whose=whose)
    b.scheduler.start(call)
    return call, outcomes


def refused_for_bytes(outcomes: Outcomes) -> str:
    """The text of the result a call refused for the bytes waiting calls keep."""
    result = outcomes.outcome
    assert isinstance(result, mcp.CallToolResult) and result.isError, result
    block = result.content[0]
    assert isinstance(block, mcp.TextContent)
    return block.text


async def test_a_call_past_its_agents_bytes_waiting_is_refused_at_once_and_no_outage(
    make: Any, autojump_clock: MockClock
) -> None:
    """Calls that wait for a slot keep what they carry: past what one agent's may
    keep, its next call is refused before it waits, with a result that names the
    bound; the server is not taken for down, and others' calls still wait."""
    b = make(limit=1)
    b.call("running")
    start(b, "q0", big(12))
    start(b, "q1", big(12))
    call, refused = start(b, "over", big(12))
    text = refused_for_bytes(refused)
    assert "one agent's may keep 32.0 MiB" in text and "not an outage" in text
    assert call.unqueued is not None and "32.0 MiB" in call.unqueued
    assert b.sent == ["running"] and [c.name for c in b.scheduler.queue] == ["q0", "q1"]
    assert b.host.failures == 0 and b.host.breaker.state == "closed"
    # What still fits waits: a small call of the agent's, another agent's big one.
    small, _ = start(b, "small", Raw(b"{}"))
    theirs, _ = start(b, "theirs", big(12), Whose(uid=4242, pid=4244, own=False))
    assert small.state == theirs.state == "queued"


async def test_a_call_waiting_for_its_server_to_start_is_weighed_as_well(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(attached=False)
    b.host.starting()
    start(b, "q0", big(12))
    start(b, "q1", big(12))
    _, refused = start(b, "over", big(12))
    assert "32.0 MiB" in refused_for_bytes(refused)


async def test_a_waiting_calls_bytes_are_given_back_as_it_is_sent_cancelled_or_timed_out(
    make: Any, autojump_clock: MockClock
) -> None:
    """Each way out of the queue gives what a call kept back: the agent may have as
    much waiting again. A call cancelled is also what an agent that hangs up leaves."""
    b = make(limit=1, queue_timeout=7.0)
    running, _ = b.call("running")
    start(b, "q0", big(12))
    q1, _ = start(b, "q1", big(12))
    b.answer(running, RESULT)  # q0 is sent
    sent_then, _ = start(b, "after sending", big(12))
    assert b.sent == ["running", "q0"] and sent_then.state == "queued"
    q1.cancel()
    cancelled_then, _ = start(b, "after cancelling", big(12))
    assert cancelled_then.state == "queued"
    _, over = start(b, "over", big(12))
    assert "32.0 MiB" in refused_for_bytes(over)
    _, timed_out = start(b, "timed out", big(1))
    await outcome_of(timed_out)
    assert outage(timed_out).state == "busy"
    assert b.scheduler.waiting.total == 0 and not b.scheduler.queue
    again, _ = start(b, "again", big(12))
    assert again.state == "queued"


async def test_a_call_that_waits_too_long_for_a_slot_is_told_why(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=1, queue_timeout=7.0)
    b.call("running")
    _, waiting = b.call("waiting")
    await outcome_of(waiting)
    assert outage(waiting).state == "busy"
    assert outage(waiting).reason == "no free slot within 7 s (1 calls at a time)"
    assert b.sent == ["running"]


async def test_a_call_to_a_stopped_server_gets_its_outage_at_once(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(attached=False)
    _, outcomes = b.call()
    assert outage(outcomes) == Outage("s", "stopped", "the server is not running")


async def test_a_call_to_a_starting_server_waits_and_is_sent_when_it_is_up(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(attached=False)
    b.host.starting()
    call, outcomes = b.call()
    assert call.state == "queued" and not outcomes.arrived.is_set()
    up = Server()
    b.scheduler.attach(up)
    assert up.sent == [call] and call.state == "running"


async def test_a_server_that_never_comes_up_fails_the_waiting_call_in_its_time(
    make: Any,
    autojump_clock: MockClock,
) -> None:
    b = make(attached=False)
    b.host.starting()
    _, outcomes = b.call(timeout=3.0)
    await outcome_of(outcomes)
    # The server's outage as the call's time ran out: still starting.
    assert outage(outcomes) == b.host.outage() and outage(outcomes).state == "starting"


async def test_queued_calls_fail_with_the_outage_that_stopped_their_server(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=1)
    b.call("running")
    queued = [b.call(f"q{i}")[1] for i in range(2)]
    gone = Outage("s", "crashed", "exit status 1")
    b.scheduler.fail_queued(gone)
    assert [o.outcome for o in queued] == [gone, gone]


# -- time limits --


async def test_a_call_with_no_answer_in_time_names_the_limit_that_set_it(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(server={"call_timeout": 2.5})
    call, outcomes = b.call("slow")
    await outcome_of(outcomes)
    found = outage(outcomes)
    assert found.state == "timeout"
    assert found.reason == "no answer within 2.5 s (the limit servers.s.call_timeout sets)"
    assert b.server.forgotten == [(call, "timed out")]
    # What it means for the server waits for what it answers next (``health``): held
    # in doubt, with a probe asked for, and not counted against it yet.
    assert b.host.health.suspect and b.host.wakes == 1 and b.host.failures == 0
    assert (b.host.stats.calls, b.host.stats.errors) == (1, 1)


async def test_a_tools_own_limit_is_named_for_it(make: Any, autojump_clock: MockClock) -> None:
    b = make(server={"tool_timeouts": {"slow": 4.0}})
    _, outcomes = b.call("slow")
    await outcome_of(outcomes)
    assert outage(outcomes).reason == (
        "no answer within 4 s (the limit servers.s.tool_timeouts sets)"
    )


async def test_a_callers_own_limit_names_no_key(make: Any, autojump_clock: MockClock) -> None:
    b = make()
    _, outcomes = b.call(timeout=1.0)
    await outcome_of(outcomes)
    assert outage(outcomes).reason == "no answer within 1 s"


async def test_a_late_answer_after_the_time_limit_is_dropped(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call(timeout=1.0)
    await outcome_of(outcomes)
    b.answer(call, RESULT)  # Outcomes refuses a second outcome
    assert outage(outcomes).state == "timeout"
    assert b.scheduler.running == 0


async def test_extending_a_call_never_passes_the_hard_limit(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(max_call_time=10.0)
    call, outcomes = b.call(timeout=2.0)
    call.extend(3600.0)  # its server waits for the agent: far longer than allowed
    await outcome_of(outcomes)
    assert outage(outcomes).reason == (
        "no answer within 10 s (the limit daemon.max_call_time sets)"
    )


async def test_an_extended_call_that_is_answered_is_not_timed_out(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call(timeout=2.0)
    call.extend(50.0)
    await trio.sleep(10.0)  # virtual: past the first limit, within the second
    assert not outcomes.arrived.is_set()
    b.answer(call, RESULT)
    assert outcomes.outcome == RESULT


# -- what each failure becomes --


@pytest.mark.parametrize(
    ("error", "state", "reason"),
    [
        (ServerCancelled("the server cancelled it"), "cancelled", "the server cancelled it"),
        (MalformedReply("not JSON"), "malformed", "not JSON"),
        (MessageTooLarge("reply of 9 MB", size=9, limit=1), "too_large", "reply of 9 MB"),
    ],
)
async def test_a_server_that_answered_badly_is_still_up(
    make: Any, autojump_clock: MockClock, error: BaseException, state: str, reason: str
) -> None:
    b = make()
    call, outcomes = b.call()
    b.answer(call, None, error)
    assert (outage(outcomes).state, outage(outcomes).reason) == (state, reason)
    assert b.host.failures == 0 and b.host.breaker.state == "closed"


@pytest.mark.parametrize(
    "error",
    [None, rpc.RPCError(rpc.INVALID_PARAMS, "no"), MalformedReply("not JSON")],
    ids=["a result", "an error", "an unreadable reply"],
)
async def test_any_reply_to_a_call_is_the_server_answering(
    make: Any, autojump_clock: MockClock, error: BaseException | None
) -> None:
    b = make()
    call, _ = b.call()
    await trio.sleep(1.0)
    b.answer(call, RESULT if error is None else None, error)
    assert b.scheduler.answered_at == trio.current_time()


async def test_a_call_out_of_time_or_whose_server_went_is_no_answer(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    _, late = b.call(timeout=1.0)
    call, _ = b.call()
    b.answer(call, None, TransportError("the server exited (status 1)"))
    await outcome_of(late)
    assert b.scheduler.answered_at == -math.inf


async def test_a_servers_json_rpc_error_is_passed_on(make: Any, autojump_clock: MockClock) -> None:
    b = make()
    call, outcomes = b.call()
    error = rpc.RPCError(rpc.INVALID_PARAMS, "no such argument")
    b.answer(call, None, error)
    assert isinstance(outcomes.outcome, rpc.RPCError)
    assert outcomes.outcome.message == "[s] no such argument"
    assert b.host.failures == 0


async def test_a_version_refused_is_mcpds_error_and_has_the_server_asked_again(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call()
    b.answer(call, None, rpc.RPCError(rpc.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported"))
    await outcome_of(outcomes)
    assert isinstance(outcomes.outcome, rpc.RPCError)
    assert outcomes.outcome.code == rpc.INTERNAL_ERROR
    assert outcomes.outcome.message.startswith("mcpd's request to the server 's' failed")
    assert b.host.rediscovery.doubted and b.host.wakes == 1 and b.host.failures == 0


async def test_a_login_needed_is_not_counted_against_the_server(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(kind="http", failure_threshold=1)
    call, outcomes = b.call()
    b.answer(call, None, LoginRequired("run `mcpd auth login s`"))
    assert outage(outcomes).state == "needs_login"
    assert b.host.failures == 0 and b.host.breaker.state == "closed"


async def test_a_stdio_server_that_died_mid_call_quotes_its_last_stderr_line(
    make: Any,
    autojump_clock: MockClock,
) -> None:
    b = make()
    call, outcomes = b.call()
    detail = "Traceback (most recent call last):\n  ...\nKeyError: 'API_KEY'\n"
    died = TransportError("the server exited (status 1)", detail=detail)
    b.server.transport.error = died  # its transport ends with the failure
    b.answer(call, None, died)
    found = outage(outcomes)
    assert (found.state, found.reason, found.stderr) == (
        "failed",
        "the server exited (status 1)",
        "KeyError: 'API_KEY'",
    )
    st = b.host.breaker.status(trio.current_time())
    assert (st.total_failures, st.trouble) == (1, "the server exited (status 1)")
    assert not b.host.health.suspect  # its process going is what is watched


async def test_an_http_failure_probes_the_server_soon(make: Any, autojump_clock: MockClock) -> None:
    b = make(kind="http")
    call, outcomes = b.call()
    b.answer(call, None, TransportError("connection refused", detail="ignored"))
    assert outage(outcomes).stderr is None
    assert b.host.health.suspect and b.host.wakes == 1


async def test_an_unexpected_error_is_an_internal_error_not_a_crash(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call()
    b.answer(call, None, KeyError("x"))
    assert outage(outcomes).reason == "internal error: KeyError('x')"


async def test_a_server_that_refuses_the_call_as_it_is_sent_fails_it(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    b.server.refuse = TransportError("the pipe is closed")
    _, outcomes = b.call()
    assert outage(outcomes).reason == "the pipe is closed"
    assert b.scheduler.running == 0


async def test_an_open_circuit_refuses_calls_without_sending_them(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(failure_threshold=2)
    for _ in range(2):
        call, _ = b.call()
        b.answer(call, None, TransportError("connection reset"))
    _, outcomes = b.call("after")
    assert outage(outcomes).state == "open"
    assert "after" not in b.sent


# -- looked at again --


class Refusing(QueuedCheck):
    """The agent side, refusing calls to the tools it names now."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.asked: list[str] = []

    def refusal(self, call: Call) -> mcp.CallToolResult | None:
        self.asked.append(call.name)
        return mcp.text_result("no longer", is_error=True) if call.name in self.names else None


async def test_a_queued_call_refused_on_a_second_look_ends_unsent_and_frees_its_place(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=1)
    demand = b.scheduler.demand = Demand()
    running, _ = b.call("running")
    _, refused = b.call("refused")
    kept, _ = b.call("kept")
    check = Refusing("running", "refused")
    b.scheduler.look_again(check)
    assert check.asked == ["refused", "kept"]  # a call already sent is not looked at
    assert isinstance(refused.outcome, mcp.CallToolResult) and refused.outcome.isError
    assert list(b.scheduler.queue) == [kept] and demand.users == 2
    b.answer(running, RESULT)
    assert b.sent == ["running", "kept"]


# -- cancelling --


async def test_a_cancelled_queued_call_leaves_the_queue_without_an_outcome(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make(limit=1)
    b.call("running")
    call, outcomes = b.call("queued")
    call.cancel()
    assert call.state == "cancelled" and len(b.scheduler.queue) == 0
    assert not outcomes.arrived.is_set()
    assert b.server.forgotten == []


async def test_a_cancelled_running_call_is_dropped_and_its_slot_goes_to_the_next(
    make: Any,
    autojump_clock: MockClock,
) -> None:
    b = make(limit=1)
    running, outcomes = b.call("running")
    b.call("next")
    running.cancel()
    assert b.server.forgotten == [(running, "cancelled by the client")]
    assert b.sent == ["running", "next"]
    b.answer(running, RESULT)  # the answer that was on its way
    assert not outcomes.arrived.is_set()


async def test_every_call_that_began_ends_once(make: Any, autojump_clock: MockClock) -> None:
    b = make(limit=1, queue_size=1)
    demand = b.scheduler.demand = Demand()
    answered, _ = b.call("answered")
    cancelled, _ = b.call("cancelled")
    b.call("refused")  # the queue is full
    assert demand.users == 2
    cancelled.cancel()
    cancelled.cancel()  # twice: counted once
    b.answer(answered, RESULT)
    assert demand.users == 0


async def test_waiting_for_idle_returns_when_the_last_call_ends(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    first, _ = b.call()
    second, _ = b.call()
    idle = trio.Event()

    async def wait() -> None:
        await b.scheduler.wait_idle()
        idle.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        b.answer(first, RESULT)
        await trio.testing.wait_all_tasks_blocked()
        assert not idle.is_set()
        b.answer(second, RESULT)
    assert idle.is_set()


# -- what a server may still ask about: only its own answer shows it is done with a call


async def question(b: Bench) -> str:
    """What comes of the server asking something with nothing on the wire to say which
    call it is about: "asked" when an agent was asked, else why nobody was."""
    form = b'{"message":"Publish the draft?","requestedSchema":{}}'
    request = rpc.Request(9, "elicitation/create", Raw(form))
    try:
        await b.host.asks.answer(request)
    except rpc.RPCError as exc:
        return exc.message
    return "asked"


def stopped(b: Bench, starting: bool) -> None:
    b.scheduler.detach()
    if starting:
        b.host.starting()
    else:
        b.host.stopped()


def back_up(b: Bench) -> None:
    b.host.connected()
    b.scheduler.attach(b.server)  # type: ignore[arg-type]


async def refused_by_the_open_circuit(b: Bench, agent: Agent) -> None:
    breaker = b.host.breaker
    for _ in range(breaker.config.failure_threshold):
        breaker.record_failure(trio.current_time(), "connection reset")
    _, outcomes = b.call("refused", by=agent)
    assert outage(outcomes).state == "open"
    await trio.sleep(breaker.config.cooldown_base)  # the next call is the circuit's probe


async def refused_with_the_server_stopped(b: Bench, agent: Agent) -> None:
    stopped(b, starting=False)
    _, outcomes = b.call("refused", by=agent)
    assert outage(outcomes).state == "stopped"
    back_up(b)


async def failed_waiting_for_the_server_as_it_stopped(b: Bench, agent: Agent) -> None:
    stopped(b, starting=True)
    _, outcomes = b.call("waiting", by=agent)
    b.host.stopped()
    b.scheduler.fail_queued(b.host.outage())
    assert outage(outcomes).state == "stopped"
    back_up(b)


async def out_of_time_waiting_for_the_server(b: Bench, agent: Agent) -> None:
    stopped(b, starting=True)
    _, outcomes = b.call("waiting", by=agent, timeout=1.0)
    await outcome_of(outcomes)
    assert outage(outcomes).state == "starting"
    back_up(b)


async def cancelled_waiting_for_the_server(b: Bench, agent: Agent) -> None:
    stopped(b, starting=True)
    call, _ = b.call("waiting", by=agent)
    call.cancel()
    back_up(b)


async def failed_as_it_was_sent(b: Bench, agent: Agent) -> None:
    b.server.refuse = b.server.transport.error = TransportError("the pipe is closed")
    _, outcomes = b.call("refused", by=agent)
    assert outage(outcomes).state == "failed"
    b.server.refuse = b.server.transport.error = None


async def cut_off_with_its_connection(b: Bench, agent: Agent) -> None:
    call, _ = b.call("cut", by=agent)
    b.answer(call, None, TransportError("connection reset"))


async def out_of_time_at_the_server(b: Bench, agent: Agent) -> None:
    _, outcomes = b.call("slow", by=agent, timeout=1.0)
    await outcome_of(outcomes)
    assert outage(outcomes).state == "timeout"


async def cancelled_at_the_server(b: Bench, agent: Agent) -> None:
    call, _ = b.call("cancelled", by=agent)
    call.cancel()


ENDED_BY_MCPD = [
    refused_by_the_open_circuit,
    refused_with_the_server_stopped,
    failed_waiting_for_the_server_as_it_stopped,
    out_of_time_waiting_for_the_server,
    cancelled_waiting_for_the_server,
    failed_as_it_was_sent,
    cut_off_with_its_connection,
    out_of_time_at_the_server,
    cancelled_at_the_server,
]


@pytest.mark.parametrize("ending", ENDED_BY_MCPD, ids=lambda f: f.__name__)
async def test_a_call_mcpd_ended_itself_does_not_end_another_agents_calls_grace(
    make: Any, autojump_clock: MockClock, ending: Callable[[Bench, Agent], Awaitable[None]]
) -> None:
    b = make()
    gone, other = Agent(), Agent()
    given_up, _ = b.call("given_up", by=gone)
    given_up.cancel()  # the server may ask about it until it shows it read the cancel
    await ending(b, other)
    b.call("next", by=other)  # in flight as the server asks
    assert "ended too lately to rule out" in await question(b)
    assert other.asked == []


async def test_the_servers_answer_to_a_call_sent_after_a_cancel_ends_its_grace(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    gone, other = Agent(), Agent()
    given_up, _ = b.call("given_up", by=gone)
    given_up.cancel()
    answered, _ = b.call("answered", by=other)
    b.answer(answered, RESULT)  # it works in order: it read the cancel first
    b.call("next", by=other)
    assert await question(b) == "asked"
    assert len(other.asked) == 1


async def refused_with_the_queue_full(b: Bench, agent: Agent) -> None:
    b.call("waiting", by=agent)
    _, outcomes = b.call("refused", by=agent)
    assert outage(outcomes).state == "busy"


async def out_of_time_waiting_for_a_slot(b: Bench, agent: Agent) -> None:
    _, outcomes = b.call("waiting", by=agent)
    await outcome_of(outcomes)
    assert outage(outcomes).state == "busy"


async def cancelled_waiting_for_a_slot(b: Bench, agent: Agent) -> None:
    call, _ = b.call("waiting", by=agent)
    call.cancel()


@pytest.mark.parametrize(
    "ending",
    [refused_with_the_queue_full, out_of_time_waiting_for_a_slot, cancelled_waiting_for_a_slot],
    ids=lambda f: f.__name__,
)
async def test_a_call_mcpd_ended_while_another_ran_is_no_sign_the_server_works_on_calls_at_once(
    make: Any, autojump_clock: MockClock, ending: Callable[[Bench, Agent], Awaitable[None]]
) -> None:
    b = make(limit=1, queue_size=1, queue_timeout=1.0)
    gone, other = Agent(), Agent()
    running, _ = b.call("running", by=gone)
    await ending(b, other)
    running.cancel()
    for call in b.server.sent:  # what of the other agent's waited for the slot
        if call.state == "running":
            b.answer(call, RESULT)
    # Answered in order, after the cancel: the server is done with the cancelled call.
    answered, _ = b.call("answered", by=other)
    b.answer(answered, RESULT)
    b.call("next", by=other)
    assert await question(b) == "asked"
    assert len(other.asked) == 1


# -- answers taken apart (``taking_apart``) --


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    walk = hold(monkeypatch)
    yield walk
    walk.release.set()


def forged(count: int) -> Raw:
    """An answer of ``count`` empty objects, with a key of mcpd's to drop."""
    empties = b",".join([b"{}"] * count)
    return Raw(b'{"content":[],"x":[' + empties + b'],"_meta":{"mcpd/server":"n","k":1}}')


async def test_a_big_answer_frees_its_slot_at_once_and_reaches_its_agent_from_the_thread(
    make: Any, held: Held
) -> None:
    b = make(limit=1)
    await trio.testing.wait_all_tasks_blocked()  # the server's thread is there to wait for
    first, answered = b.call("t")
    b.call("u")
    assert b.sent == ["t"]
    with trio.fail_after(30):
        b.answer(first, forged(3 * AT_ONCE_PARTS))
        assert b.sent == ["t", "u"] and not answered.arrived.is_set()
        await trio.to_thread.run_sync(held.entered.wait)
        held.release.set()
        await answered.arrived.wait()
    assert isinstance(answered.outcome, Raw) and b'"_meta":{"k":1}' in bytes(answered.outcome)
    assert (b.host.stats.calls, b.host.stats.errors) == (1, 0)


async def test_a_call_cancelled_while_its_answer_is_taken_apart_gets_nothing(
    make: Any, held: Held
) -> None:
    b = make()
    b.scheduler.demand = demand = Demand()
    await trio.testing.wait_all_tasks_blocked()
    call, answered = b.call()
    with trio.fail_after(30):
        b.answer(call, forged(3 * AT_ONCE_PARTS))
        await trio.to_thread.run_sync(held.entered.wait)
        call.cancel()
        assert call.state == "cancelled"
        held.release.set()
        again, later = b.call()
        b.answer(again, forged(3 * AT_ONCE_PARTS))  # taken apart after the first
        await later.arrived.wait()
    assert not answered.arrived.is_set() and len(held.threads) == 2
    assert demand.users == 0  # each call ended once


async def test_a_call_whose_answer_is_being_taken_apart_is_no_cause_of_what_its_server_asks(
    make: Any, held: Held
) -> None:
    # The server replied: it is done with that call, and what it asks meanwhile is
    # about another agent's, which is then the only one in flight.
    b = make()
    await trio.testing.wait_all_tasks_blocked()
    first, other = Agent(), Agent()
    call, answered = b.call("big", by=first)
    with trio.fail_after(30):
        b.answer(call, forged(3 * AT_ONCE_PARTS))
        await trio.to_thread.run_sync(held.entered.wait)
        b.call("next", by=other)
        assert await question(b) == "asked"
        held.release.set()
        await answered.arrived.wait()
    assert (len(other.asked), first.asked) == (1, [])


async def test_an_answer_too_big_to_take_apart_fails_its_call_and_not_the_server(
    make: Any, autojump_clock: MockClock
) -> None:
    b = make()
    call, outcomes = b.call()
    b.answer(call, forged(MOST_PARTS))
    refused = outage(outcomes)
    assert refused.state == "malformed" and "more than the 250,000" in refused.reason
    assert b.host.breaker.state == "closed" and b.host.failures == 0
