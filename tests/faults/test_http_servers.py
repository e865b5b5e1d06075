"""Hostile Streamable HTTP servers (in this process, on 127.0.0.1): slow, cut, oversized,
redirecting, resetting and deaf replies to tools/call, with the same promises as the
stdio cases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from tests.support.daemons.fault_harness import Agent, Case, is_error_result, run_case, text_of
from tests.support.hostile.http_server import HostileHttp, serve_hostile_http

BAD = "mcp__bad__"
TIMED_OUT = r"\[bad\].*no answer within 2(\.\d+)? s"
FAILED = r"\[bad\].*tools/call '{tool}' failed"


async def call_ok(a: Agent, tool: str, text: str) -> None:
    reply = await a.call(BAD + tool, text)
    assert text_of(reply) == f"{tool}:{text}" and not is_error_result(reply), reply


async def call_fails(a: Agent, tool: str, *words: str) -> str:
    reply = await a.call(BAD + tool, "x")
    assert is_error_result(reply), reply
    said = text_of(reply)
    assert "'bad'" in said, said
    for word in words:
        assert word.lower() in said.lower(), said
    return said


def failing(tool: str, *words: str) -> Callable[[Case, HostileHttp], Awaitable[None]]:
    """The call fails with a readable error result; the server keeps serving."""

    async def body(case: Case, server: HostileHttp) -> None:
        async with case.agent() as a:
            await call_fails(a, tool, *words)
            await case.wait_state(a, "bad", {"ready", "degraded"})
            for i in range(3):
                await call_ok(a, "echo", f"after{i}")

    return body


async def http10(case: Case, server: HostileHttp) -> None:
    async with case.agent() as a:
        for i in range(5):
            await call_ok(a, "http10", f"h{i}")
        await call_ok(a, "echo", "after")


def answered(tool: str) -> Callable[[Case, HostileHttp], Awaitable[None]]:
    """The call gets its answer: what was odd around it is ignored."""

    async def body(case: Case, server: HostileHttp) -> None:
        async with case.agent() as a:
            for i in range(3):
                await call_ok(a, tool, f"t{i}")
            await call_ok(a, "echo", "after")

    return body


async def redirects(case: Case, server: HostileHttp) -> None:
    async with case.agent() as a:
        await call_fails(a, "redirects", "redirects")
        case.note = f"the server sent {server.redirects_served + 1} redirects"
        assert server.redirects_served <= 5
        await call_ok(a, "echo", "after")


def huge(tool: str, *words: str) -> Callable[[Case, HostileHttp], Awaitable[None]]:
    async def body(case: Case, server: HostileHttp) -> None:
        async with case.agent() as a:
            await call_fails(a, tool, *words)
            case.note = f"{server.bytes_streamed / (1 << 20):.0f} MiB of 2048 MiB sent"
            await case.wait_state(a, "bad", {"ready", "degraded"})
            await call_ok(a, "echo", "after")

    return body


async def deaf_later(case: Case, server: HostileHttp) -> None:
    async with case.agent() as a:
        await call_fails(a, "deaf", "no answer within")
        # Deaf on every connection now: the probe fails too and the server goes down.
        await case.wait_state(a, "bad", {"failed", "crash_loop", "open"}, restarted=True)
        await call_fails(a, "echo")


async def deaf_from_start(case: Case, server: HostileHttp) -> None:
    async with case.agent() as a:
        await case.wait_state(a, "bad", {"failed", "crash_loop"})
        listed = (await a.request("tools/list"))["result"]
        states = {s["server"]: s for s in listed["_meta"]["mcpd/servers"]}
        assert states["bad"]["available"] is False, states
        # Never listed, so its tools are unknown; the answer comes at once all the same.
        with trio.fail_after(1):
            reply = await a.call(BAD + "echo", "x")
        assert is_error_result(reply), reply
        case.note = f"{server.open_connections} connections open at the server"


HttpBody = Callable[[Case, HostileHttp], Awaitable[None]]
CASES: list[tuple[str, HttpBody, dict[str, Any]]] = [
    ("slow headers", failing("slow_headers", "no answer within"), {"log_expect": [TIMED_OUT]}),
    (
        "slow body, one byte a second",
        failing("slow_body", "no answer within"),
        {"log_expect": [TIMED_OUT]},
    ),
    (
        "chunked body cut mid-chunk",
        failing("chunked_cut"),
        {"log_expect": [FAILED.format(tool="chunked_cut")]},
    ),
    ("SSE cut mid-event", failing("sse_cut"), {"log_expect": [FAILED.format(tool="sse_cut")]}),
    (
        "Content-Length larger than the body",
        failing("short_body"),
        {"log_expect": [FAILED.format(tool="short_body")]},
    ),
    ("100 redirects", redirects, {"log_expect": [FAILED.format(tool="redirects")]}),
    (
        "2 GiB body with Content-Length",
        huge("huge_body", "larger than"),
        {"log_expect": [FAILED.format(tool="huge_body")], "rss_bound_mib": 48},
    ),
    (
        "2 GiB chunked body",
        huge("huge_chunked", "larger than"),
        {"log_expect": [FAILED.format(tool="huge_chunked")], "rss_bound_mib": 64},
    ),
    (
        "2 GiB SSE event",
        huge("huge_sse", "larger than"),
        {"log_expect": [FAILED.format(tool="huge_sse")], "rss_bound_mib": 64},
    ),
    (
        "invalid UTF-8",
        failing("invalid_utf8", "UTF-8"),
        {"log_expect": [FAILED.format(tool="invalid_utf8")]},
    ),
    ("HTTP/1.0 close-delimited body", http10, {}),
    (
        "connection reset during the request",
        failing("reset"),
        {"log_expect": [FAILED.format(tool="reset")]},
    ),
    ("stops reading its connections", deaf_later, {"log_expect": [TIMED_OUT]}),
    ("SSE retry of 5000 digits", answered("huge_retry"), {}),
    (
        "308 to a target with a space and a non-ASCII letter",
        failing("odd_redirect", "redirect", "visible ASCII"),
        {"log_expect": [FAILED.format(tool="odd_redirect")]},
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "options"), CASES, ids=[c[0].replace(" ", "-") for c in CASES]
)
async def test_hostile_http_server(name: str, body: HttpBody, options: dict[str, Any]) -> None:
    async with serve_hostile_http() as server:

        async def run(case: Case) -> None:
            await body(case, server)

        await run_case(
            "http server", name, run, servers=lambda pids: {"bad": {"url": server.url()}}, **options
        )


async def test_a_server_that_accepts_but_never_reads() -> None:
    async with serve_hostile_http(deaf=True) as server:

        async def run(case: Case) -> None:
            await deaf_from_start(case, server)

        await run_case(
            "http server",
            "accepts connections, never reads",
            run,
            servers=lambda pids: {"bad": {"url": server.url()}},
            daemon={"startup_deadline": 3.0, "list_timeout": 3.0},
            log_expect=[r"\[bad\].*(did not answer in time|unavailable)"],
        )
