"""Hostile stdio servers: each case adds one to a running daemon, provokes it, and checks
that mcpd stays up, answers every request once, keeps the steady server working, stays
within its memory bound, leaks nothing and names the server in its log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.daemons.fault_harness import (
    Agent,
    Case,
    hostile,
    is_error_result,
    run_case,
    text_of,
)

BAD = "mcp__bad__"
TIMED_OUT = r"\[bad\].*no answer within 2(\.\d+)? s"
HELD_BACK = r"\[bad\].*reading held back: it sends more than mcpd reads"


def bad(*flags: str, **settings: Any) -> Callable[[Path], dict[str, Any]]:
    return lambda pids: {"bad": hostile(pids, *flags, **settings)}


async def call_ok(a: Agent, tool: str, text: str) -> dict[str, Any]:
    reply = await a.call(BAD + tool, text)
    assert text_of(reply) == f"{tool}:{text}" and not is_error_result(reply), reply
    return reply


async def call_fails(a: Agent, tool: str, *words: str) -> str:
    """The call must come back as a readable error result naming the server."""
    reply = await a.call(BAD + tool, "x")
    assert is_error_result(reply), reply
    said = text_of(reply)
    assert "'bad'" in said, said
    for word in words:
        assert word in said, said
    return said


async def many(n: int, limit: int, one: Callable[[int], Awaitable[object]]) -> None:
    """``n`` calls, ``limit`` at a time."""
    gate = trio.Semaphore(limit)

    async def run(i: int) -> None:
        async with gate:
            await one(i)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(run, i)


# -- the cases -----------------------------------------------------------------------------------


async def bytewise(case: Case) -> None:
    async with case.agent() as a:
        await many(8, 4, lambda i: call_ok(a, "bytewise", f"b{i}"))
        await many(8, 4, lambda i: call_ok(a, "echo", f"e{i}"))


async def batched(case: Case) -> None:
    async with case.agent() as a:
        await many(9, 3, lambda i: call_ok(a, "batched", f"b{i}"))


async def banners(case: Case) -> None:
    async with case.agent() as a:
        await many(20, 4, lambda i: call_ok(a, "echo", f"e{i}"))


async def invalid_json(case: Case) -> None:
    async with case.agent() as a:
        await many(6, 3, lambda i: call_ok(a, "invalid_json", f"j{i}"))
        await call_ok(a, "echo", "after")


async def not_jsonrpc(case: Case) -> None:
    async with case.agent() as a:
        await many(6, 3, lambda i: call_ok(a, "not_jsonrpc", f"n{i}"))
        await call_ok(a, "echo", "after")


async def unknown_id(case: Case) -> None:
    async with case.agent() as a:
        await many(6, 3, lambda i: call_ok(a, "unknown_id", f"u{i}"))


async def duplicate(case: Case) -> None:
    async with case.agent() as a:
        # The first answer is the one delivered; the second must go nowhere.
        await many(6, 3, lambda i: call_ok(a, "duplicate", f"d{i}"))
        await call_ok(a, "echo", "after")


async def wrong_id_type(case: Case) -> None:
    async with case.agent() as a:
        # "3" is not 3, but plainly meant for it: the call fails at once, not at its
        # time limit.
        await call_fails(a, "wrong_id_type", "malformed reply", "(a string) for request")
        await call_ok(a, "echo", "after")


async def notification_flood(case: Case) -> None:
    async with case.agent() as a, trio.open_nursery() as nursery:
        done = trio.Event()

        async def flood() -> None:
            await call_ok(a, "flood", "f")
            done.set()

        nursery.start_soon(flood)
        rounds = 0
        while not done.is_set():
            prefix = str(rounds)
            # many() awaits every call before the loop moves on, so prefix is stable.
            await many(3, 3, lambda j: call_ok(a, "echo", f"{prefix}-{j}"))  # noqa: B023
            rounds += 1
        case.note = f"{rounds * 3} calls answered during the flood"


async def huge_line(case: Case) -> None:
    async with case.agent() as a:
        await call_fails(a, "huge_line", "line limit")
        await many(4, 4, lambda i: call_ok(a, "echo", f"e{i}"))


async def never(case: Case) -> None:
    async with case.agent() as a:
        await many(3, 3, lambda i: call_fails(a, "never", "no answer within"))
        await call_ok(a, "echo", "after")


async def late(case: Case) -> None:
    async with case.agent() as a:
        await call_fails(a, "late", "no answer within")
        # The answer arrives a second later and must not be delivered to anybody.
        await trio.sleep(1.5)
        await call_ok(a, "echo", "after")


async def restarted(case: Case, a: Agent) -> None:
    """Started again after a call failed: answering, and shown degraded until a call
    succeeds (a restart is not one), then ready."""
    await case.wait_state(a, "bad", (), restarted=True)
    await case.wait_state(a, "bad", {"ready", "degraded"})
    await call_ok(a, "echo", "after restart")
    await case.wait_state(a, "bad", {"ready"})


async def close_stdout(case: Case) -> None:
    async with case.agent() as a:
        await call_fails(a, "close_stdout", "closed its stdout")
        await restarted(case, a)


async def exits(case: Case) -> None:
    async with case.agent() as a:
        await call_fails(a, "exit", "exited with status 7")
        await restarted(case, a)


async def ignores_sigterm(case: Case) -> None:
    async with case.agent() as a:
        await call_ok(a, "echo", "still fine")
    # Removing the server at the end of the case must get rid of it all the same.


async def grandchild(case: Case) -> None:
    async with case.agent() as a:
        with trio.fail_after(5):  # the helper holds stdout open; the exit must be seen anyway
            await call_fails(a, "exit", "exited with status 7")
        await restarted(case, a)


async def stderr_flood(case: Case) -> None:
    async with case.agent() as a:
        await call_ok(a, "stderr_flood", "s")
        end = trio.current_time() + 2.5
        i = 0
        while trio.current_time() < end:
            await call_ok(a, "echo", f"e{i}")
            i += 1


async def garbage_flood(case: Case) -> None:
    async with case.agent() as a, trio.open_nursery() as nursery:
        done = trio.Event()

        async def flood() -> None:
            await call_ok(a, "garbage_flood", "g")
            done.set()

        nursery.start_soon(flood)
        i = 0
        while not done.is_set():
            await call_ok(a, "echo", f"e{i}")
            i += 1
        case.note = f"{i} calls answered during the flood"


async def invalid_utf8(case: Case) -> None:
    async with case.agent() as a:
        # It reached the agent as valid UTF-8 JSON (the agent checks), saying what the
        # reply was, not that the server took too long.
        await call_fails(a, "invalid_utf8", "malformed reply", "not valid UTF-8", "still running")
        await call_ok(a, "echo", "after")


async def nested_deep(case: Case) -> None:
    async with case.agent() as a:
        await call_fails(a, "nested_deep", "malformed reply", "nested too deeply")
        await call_ok(a, "echo", "after")


async def breaker_recovers(case: Case) -> None:
    async with case.agent() as a:
        # The first stops the server answering anything, its probe too: an outage, not
        # a slow tool (``never`` at a server that answers is no failure of the server's).
        await many(3, 3, lambda i: call_fails(a, "freeze", "no answer within"))
        # Open until it is started again, which shows it is there: closed on trial.
        await case.wait_state(a, "bad", {"open", "half_open"}, restarted=True)
        # Calls keep coming, as they do under load: the first to be answered must
        # close the circuit for good.
        recovered = trio.Event()

        async def keep_calling(k: int) -> None:
            # A slow tool, so that a probe is out whenever the runner itself looks.
            while not recovered.is_set():
                await a.call(BAD + "slow", f"k{k}")

        async with trio.open_nursery() as nursery:
            for k in range(4):
                nursery.start_soon(keep_calling, k)
            await case.wait_state(a, "bad", {"ready"}, timeout=10)
            recovered.set()
        await many(8, 4, lambda i: call_ok(a, "echo", f"e{i}"))


CASES: list[
    tuple[str, Callable[[Case], Awaitable[None]], Callable[[Path], Any], dict[str, Any]]
] = [
    ("response one byte at a time", bytewise, bad(), {}),
    ("several responses in one write", batched, bad(max_concurrency=3), {}),
    (
        "banners and logs on stdout",
        banners,
        bad("--banners"),
        {"log_expect": [r"\[bad\].*not JSON-RPC"]},
    ),
    ("invalid JSON", invalid_json, bad(), {"log_expect": [r"\[bad\].*not JSON-RPC"]}),
    ("JSON that is not JSON-RPC", not_jsonrpc, bad(), {"log_expect": [r"\[bad\].*not JSON-RPC"]}),
    ("response with an unknown id", unknown_id, bad(), {"log_expect": [r"\[bad\].*id 1000000000"]}),
    ("duplicate response", duplicate, bad(), {"log_expect": [r"\[bad\].*(duplicate|second)"]}),
    (
        "response with a string id for a number",
        wrong_id_type,
        bad(),
        {"log_expect": [r'\[bad\].*under the id "\d+" \(a string\) for request \d+']},
    ),
    (
        "100k notifications/s during calls",
        notification_flood,
        bad(),
        # Read more slowly than it writes, its own call takes longer than the default limit.
        {"daemon": {"call_timeout": 30.0}, "log_expect": [HELD_BACK]},
    ),
    (
        "a 64 MiB line",
        huge_line,
        bad(),
        {"log_expect": [r"\[bad\].*line limit"], "rss_bound_mib": 48},
    ),
    ("never answers", never, bad(), {"log_expect": [TIMED_OUT]}),
    (
        "answers after the timeout",
        late,
        bad("--late", "3"),
        {"log_expect": [TIMED_OUT]},
    ),
    (
        "closes stdout, keeps running",
        close_stdout,
        # Unsandboxed: in a sandbox bubblewrap holds the server's stdout until it exits,
        # so a server that closes it and lingers is seen by its calls timing out.
        bad("--linger", sandbox="off"),
        {"log_expect": [r"\[bad\].*closed its stdout"]},
    ),
    (
        "exits between request and response",
        exits,
        bad(),
        {"log_expect": [r"\[bad\].*exited with status 7"]},
    ),
    (
        "ignores SIGTERM",
        ignores_sigterm,
        bad("--ignore-sigterm", "--linger"),
        {"log_expect": [r"\[bad\].*SIGKILL"]},
    ),
    (
        "grandchild holds stdout open",
        grandchild,
        bad("--grandchild"),
        {"log_expect": [r"\[bad\].*exited with status 7"]},
    ),
    (
        "floods stderr",
        stderr_flood,
        bad(),
        {"log_expect": [r"\[bad\].*lines of output from bad suppressed"]},
    ),
    (
        "floods stdout with non-JSON lines",
        garbage_flood,
        bad(),
        {"daemon": {"call_timeout": 30.0}, "log_expect": [r"\[bad\].*not JSON-RPC", HELD_BACK]},
    ),
    (
        "a server answering nothing opens the breaker, a call answered closes it",
        breaker_recovers,
        bad(),
        {
            "log_expect": [r"\[bad\].*circuit open", r"\[bad\].*circuit closed, server"],
            "daemon": {"failure_threshold": 3, "cooldown_base": 3.0},
        },
    ),
    (
        "invalid UTF-8 in a result",
        invalid_utf8,
        bad(),
        {"log_expect": [r"\[bad\].*not valid UTF-8 and was dropped.*id \d+"]},
    ),
    (
        "a result nested 5000 deep",
        nested_deep,
        bad(),
        {"log_expect": [r"\[bad\].*nested too deeply and was dropped"]},
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "servers", "options"), CASES, ids=[c[0].replace(" ", "-") for c in CASES]
)
async def test_hostile_stdio_server(
    name: str,
    body: Callable[[Case], Awaitable[None]],
    servers: Callable[[Path], dict[str, Any]],
    options: dict[str, Any],
) -> None:
    await run_case("stdio server", name, body, servers=servers, **options)
