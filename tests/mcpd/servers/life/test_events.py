"""The journal lines of one server's life on their own: what each event says, at which
level, with which fields; how often a server that stays down is written about; and
how each failure of an attempt is named."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from mcpd.servers.circuit.circuit_states import Transition
from mcpd.servers.life.backoff import BackoffConfig, Restart
from mcpd.servers.life.events import REMINDER_EVERY, Failure, LifecycleJournal, describe_failure
from mcpd.servers.status.outage import clock_time
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from transports.errors import SpawnError, TransportClosed, Unreachable

STDERR = ["Error: missing API_KEY"]
POLICY = BackoffConfig(max_restarts=5, window=60.0, cap=60.0)


@pytest.fixture
def journal(caplog: pytest.LogCaptureFixture) -> LifecycleJournal:
    caplog.set_level(logging.DEBUG, "mcpd.server")
    return LifecycleJournal("s", lambda: list(STDERR))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str | None, str]]:
    """(level, event field, message) of each line, debug ones included."""
    return [
        (r.levelno, getattr(r, "mcpd_event", None), r.getMessage())
        for r in caplog.records
        if r.name == "mcpd.server"
    ]


def restart(failures: int = 1, *, entered: bool = False) -> Restart:
    return Restart(delay=1.0, at=100.0, failures=failures, entered_crash_loop=entered)


def fail(
    journal: LifecycleJournal,
    reason: str = "connection refused",
    *,
    event: str = "outage",
    first: bool = False,
    changed: bool = False,
    failures: int = 1,
    entered: bool = False,
    process: bool = True,
) -> None:
    journal.failed(
        event,
        f"s: {reason}\nmore on a line of its own",
        reason,
        retry_at=100.0,
        restart=restart(failures, entered=entered),
        policy=POLICY,
        first=first,
        changed=changed,
        process=process,
    )


async def test_a_server_going_down_says_why_once_and_when_it_is_tried_again(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    fail(journal, first=True)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    # The first line of the detail only, without the server's name twice.
    assert record.getMessage() == (
        f"unavailable: connection refused; retrying at {clock_time(100.0)}"
    )
    assert record.mcpd_server == "s"  # type: ignore[attr-defined]
    assert record.mcpd_event == "outage"  # type: ignore[attr-defined]
    assert record.mcpd_reason == "connection refused"  # type: ignore[attr-defined]
    assert record.mcpd_stderr == "Error: missing API_KEY"  # type: ignore[attr-defined]


async def test_a_server_that_stays_down_is_reminded_of_not_repeated(
    journal: LifecycleJournal,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.testing.MockClock,
) -> None:
    fail(journal, first=True)
    for _ in range(3):
        await trio.sleep(REMINDER_EVERY / 4)
        fail(journal)
    await trio.sleep(REMINDER_EVERY / 4)
    fail(journal)
    said = lines(caplog)
    assert [level for level, _, _ in said] == [
        logging.WARNING,
        logging.DEBUG,
        logging.DEBUG,
        logging.DEBUG,
        logging.WARNING,
    ]
    assert said[1][2] == "s: attempt failed again: connection refused"
    assert said[-1][2].startswith("still unavailable: connection refused; ")


async def test_a_new_reason_is_said_at_once(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    fail(journal, first=True)
    fail(journal, "TLS handshake failed", changed=True)
    assert [m for _, _, m in lines(caplog)][1].startswith("still unavailable: TLS handshake failed")


async def test_a_command_that_cannot_start_is_an_error(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    fail(journal, "no such file: srv", event="spawn_failed", first=True)
    assert lines(caplog) == [
        (
            logging.ERROR,
            "spawn_failed",
            f"unavailable: no such file: srv; retrying at {clock_time(100.0)}",
        )
    ]


async def test_entering_a_crash_loop_is_said_once_with_the_last_error(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    fail(journal, "exited with status 1", failures=5, entered=True)
    fail(journal, "no such file: srv", event="spawn_failed", failures=5, entered=True)
    assert lines(caplog) == [
        (
            logging.ERROR,
            "crash_loop",
            "crash loop: 5 failures within 60 s; retrying every 60 s. "
            "Last error: exited with status 1",
        ),
        (
            logging.ERROR,
            "spawn_failed",
            "still cannot start after 5 attempts within 60 s: no such file: srv; "
            "retrying every 60 s",
        ),
    ]
    assert all(r.mcpd_stderr == STDERR[0] for r in caplog.records)  # type: ignore[attr-defined]


async def test_a_remote_server_unreachable_for_long_says_its_delays_grow(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    fail(journal, "cannot connect", failures=POLICY.max_restarts, process=False)
    assert lines(caplog) == [
        (
            logging.WARNING,
            "outage",
            f"still unavailable after 5 attempts: cannot connect; retrying with delays "
            f"growing to 60 s, next at {clock_time(100.0)}",
        )
    ]


async def test_the_breakers_moves(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    journal.breaker(Transition("closed", "open", 1.0, "5 failures", 31.0))
    journal.breaker(Transition("open", "half_open", 31.0, None, None))
    journal.breaker(Transition("half_open", "closed", 32.0, None, None, trial=True))
    journal.breaker(Transition("closed", "closed", 33.0, None, None))
    assert lines(caplog) == [
        (
            logging.WARNING,
            "breaker_open",
            f"circuit open after failures (5 failures); next probe at {clock_time(31.0)}",
        ),
        (logging.INFO, "breaker_half_open", "circuit half-open, probing"),
        # An answer is no call: only a call that succeeds is a recovery.
        (
            logging.INFO,
            "breaker_trial",
            "circuit closed on trial: the server answers, and its next call decides",
        ),
        (logging.INFO, "recovered", "circuit closed, server answering again"),
    ]
    # The server's stderr goes with its going down, not with its circuit.
    assert not any(hasattr(r, "mcpd_stderr") for r in caplog.records)


async def test_ready_recovered_switched_and_restarting(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    journal.connected(False, "modern era (2026-07-28)", 3)
    journal.connected(True, "modern era (2026-07-28)", 4)
    journal.switched("http", "sse")
    journal.restarting("restarting after an exit", 1)
    journal.restarting("restarting after an exit", 3)
    assert lines(caplog) == [
        (logging.INFO, "ready", "modern era (2026-07-28), 3 tools"),
        (logging.INFO, "recovered", "available again (4 tools)"),
        (
            logging.INFO,
            "transport",
            "speaks the old HTTP+SSE transport (2024-11-05), not Streamable HTTP; using that",
        ),
        (logging.INFO, "restart", "restarting after an exit"),
        (logging.DEBUG, None, "s: restarting after an exit (attempt 4)"),
    ]


def runner_stand_in(journal: LifecycleJournal) -> None:
    """Stands for the runner: it calls the journal itself, and through its downtime
    keeper (``fail``)."""
    fail(journal, first=True)
    journal.restarting("restarting", 1)  # the keeper's call, made here for brevity
    journal.connected(False, "legacy era", 1)
    journal.switched("http", "sse")


async def test_a_line_names_the_runners_code_where_the_event_happened(
    journal: LifecycleJournal, caplog: pytest.LogCaptureFixture
) -> None:
    runner_stand_in(journal)
    failed, _, ready, switched = caplog.records
    assert (failed.funcName, failed.pathname) == ("runner_stand_in", __file__)
    assert ready.funcName == "runner_stand_in"
    assert switched.funcName == "runner_stand_in"


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            SpawnError("s: cannot run srv", detail="No such file or directory"),
            Failure(
                "spawn_failed", "s: cannot run srv\nNo such file or directory", "s: cannot run srv"
            ),
        ),
        (
            MessageTooLarge("s: a reply over 4 MiB", size=None, limit=4),
            Failure("outage", "s: a reply over 4 MiB", "s: a reply over 4 MiB"),
        ),
        (
            MalformedReply("s: invalid UTF-8"),
            Failure("outage", "s: invalid UTF-8", "s: invalid UTF-8"),
        ),
        (
            Unreachable("s: HTTP 503", retry_after=30.0),
            Failure("outage", "s: HTTP 503", "s: HTTP 503", 30.0),
        ),
        (
            TransportClosed("s: exited", detail="status 1"),
            Failure("outage", "s: exited\nstatus 1", "s: exited"),
        ),
        (
            rpc.RPCError(rpc.INVALID_REQUEST, "unsupported protocol version"),
            Failure(
                "outage",
                'protocol error: "unsupported protocol version"',
                'protocol error: "unsupported protocol version"',
            ),
        ),
        (
            trio.TooSlowError(),
            Failure(
                "outage",
                "did not answer in time while connecting",
                "did not answer in time while connecting",
            ),
        ),
        (
            KeyError("x"),
            Failure("internal", "internal error: KeyError('x')", "internal error: KeyError('x')"),
        ),
    ],
    ids=[
        "spawn",
        "too large",
        "malformed",
        "retry after",
        "closed",
        "json-rpc",
        "too slow",
        "a bug",
    ],
)
def test_how_each_failure_is_named(exc: Exception, expected: Failure) -> None:
    assert describe_failure(exc, "s") == expected


def test_a_bug_is_journaled_as_an_outage() -> None:
    failure = describe_failure(ValueError("boom"), "s")
    assert failure is not None
    assert (failure.event, failure.log_event) == ("internal", "outage")
    spawn = describe_failure(SpawnError("s: cannot run"), "s")
    assert spawn is not None and spawn.log_event == "spawn_failed"
