"""Hostile agents on the socket: garbage, absurd JSON, connection storms, a client that
never reads, and one that asks faster than any server answers. mcpd must answer every
request it could read exactly once, drop only the connections that earn it, stay
within its memory bound, leak nothing, and say which agent it was in its log."""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.entry.places import OWNER_RESERVE
from protocol.jsonrpc.messages import MAX_ID_LENGTH, MAX_INT_ID, MIN_INT_ID
from tests.support.daemons.fault_harness import (
    META,
    MIB,
    Agent,
    Case,
    fd_count,
    hostile,
    id_key,
    is_error_result,
    run_case,
    text_of,
)

AGENT_LOG = r"agent \(pid \d+"


def needs_reply(line: bytes) -> bool:
    """Whether mcpd owes this line (sent alone, not a request) an error reply: any line
    with something in it except whitespace, once a final CR is taken off."""
    line = line.removesuffix(b"\r")
    return bool(line) and not line.isspace()


async def ping(a: Agent) -> None:
    reply = await a.request("ping", timeout=10)
    assert reply.get("result") == {"resultType": "complete"}, reply


# -- the cases -------------------------------------------------------------------------------


async def random_bytes(case: Case) -> None:
    rng = random.Random(1234)
    async with case.agent() as a:
        for _round in range(40):
            chunk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 4000)))
            lines = chunk.split(b"\n")
            # Only whole lines: the last piece is closed with a newline of its own.
            a.expect_null(sum(needs_reply(line) for line in lines))
            await a.send_line(chunk + b"\n")
            await ping(a)
        case.note = f"{a.expected_null} garbage lines"


async def banner_first(case: Case) -> None:
    """A first line that is neither JSON nor HTTP, as a chatty client might send."""
    for banner in (b"Hello from a client", b"F\r\xe1S", b"GET", b"ok: ready"):
        async with case.agent() as a:
            a.expect_null()
            await a.send_line(banner)
            await ping(a)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def deep_nesting(case: Case) -> None:
    depth = 100_000
    async with case.agent() as a:
        for line in (
            nested(depth),
            b'{"a":' * depth + b"1" + b"}" * depth,
            b'{"jsonrpc":"2.0","id":"deep-params","method":"ping","params":{"x":'
            + nested(depth)
            + b"}}",
            b'{"jsonrpc":"2.0","id":' + nested(depth) + b',"method":"ping"}',
            b'{"jsonrpc":"2.0","id":"deep-args","method":"tools/call","params":{"name":'
            b'"mcp__steady__echo","arguments":{"text":' + nested(depth) + b"}}}",
        ):
            a.expect_null()
            await a.send_line(line)
            await ping(a)


async def huge_ids(case: Case) -> None:
    async with case.agent() as a:
        good: list[Any] = ["i" * MAX_ID_LENGTH, MAX_INT_ID, MIN_INT_ID, 0, -1, "", "é" * 256]
        for rid in good:
            reply = await a.request("ping", rid=rid)
            assert reply["id"] == rid and reply["result"] == {"resultType": "complete"}, str(reply)[
                :200
            ]
        # Past the bounds: refused under a null id, neither kept nor echoed.
        for huge in ("i" * MIB, 10**30, -(10**30), MAX_INT_ID + 1, "é" * 1000):
            a.expect_null()
            await a.send_line(json.dumps({"jsonrpc": "2.0", "id": huge, "method": "ping"}).encode())
        # Not ids at all: the error reply cannot name them.
        for bad_id in (b"1e400", b"1.5", b"true", b"null", b"[1]", b'{"a":1}'):
            a.expect_null()
            await a.send_line(b'{"jsonrpc":"2.0","id":' + bad_id + b',"method":"ping"}')
        await ping(a)


async def non_string_methods(case: Case) -> None:
    async with case.agent() as a:
        methods: tuple[Any, ...] = (42, None, [], {}, True, 1.5, ["tools/call"])
        for i, method in enumerate(methods):
            rid = f"m{i}"
            a.expect(rid)
            body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": META}}
            await a.send_line(json.dumps(body).encode())
        await a.settle()
        for i in range(7):
            assert a.replies[id_key(f"m{i}")] == 1
        await ping(a)


async def arguments_not_an_object(case: Case) -> None:
    """Refused at the socket: they must not reach (and perhaps crash) a server."""
    async with case.agent() as a:
        for args in ([1, 2], "text", 3, True, [{"text": "x"}]):
            reply = await a.request("tools/call", {"name": "mcp__steady__echo", "arguments": args})
            assert reply.get("error", {}).get("code") == -32602, reply
        await ping(a)


async def huge_tool_name(case: Case) -> None:
    async with case.agent() as a:
        for size in (1, 4, 8):
            reply = await a.call("x" * (size * MIB), timeout=30)
            assert is_error_result(reply), str(reply)[:300]
            await ping(a)


async def connection_storm(case: Case) -> None:
    """10,000 connections opened and abandoned, some holding on past the limit."""
    path = case.daemon.socket_path
    total, batch = 10_000, 500
    refused = 0

    async def one(i: int) -> None:
        nonlocal refused
        with trio.fail_after(20):
            stream = await trio.open_unix_socket(path)
            try:
                if i % 5 == 1:
                    await stream.send_all(b'{"jsonrpc":"2.0","id":1,"meth')  # half a line
                elif i % 5 in (2, 3):
                    # Hold on a moment, so the connection limit is reached.
                    with trio.move_on_after(0.5):
                        data = await stream.receive_some(4096)
                        if b"too many connections" in data:
                            refused += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # mcpd hung up first: refused at the limit
            finally:
                await trio.aclose_forcefully(stream)

    async with case.agent() as a:
        for start in range(0, total, batch):
            async with trio.open_nursery() as nursery:
                for i in range(start, start + batch):
                    nursery.start_soon(one, i)
            await ping(a)
        case.note = f"{total} connections, {refused} refused at the limit"


async def silent_connections(case: Case) -> None:
    """Connections that never send a byte still count against max_connections."""
    path = case.daemon.socket_path
    streams: list[trio.SocketStream] = []
    refused = 0
    try:
        with trio.fail_after(20):
            for _ in range(300):
                streams.append(await trio.open_unix_socket(path))
            fds_held = fd_count(case.daemon.pid)
            for stream in streams:
                with trio.move_on_after(0.01):
                    if b"too many connections" in await stream.receive_some(4096):
                        refused += 1
    finally:
        for stream in streams:
            await trio.aclose_forcefully(stream)
    case.note = f"300 silent connections held, {refused} refused; mcpd had {fds_held} fds"
    # The test runs as the daemon's own user, which has a few places more.
    assert refused >= 300 - 100 - OWNER_RESERVE, case.note
    async with case.agent() as a:
        await ping(a)


async def never_reads(case: Case) -> None:
    """Sends calls with 256 KiB results and never reads one of them."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    with trio.fail_after(10):
        await stream.socket.connect(case.daemon.socket_path)
    sent = 0
    request: dict[str, Any] = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "mcp__bad__big", "arguments": {}, "_meta": META},
    }
    try:
        with trio.move_on_after(45):
            while True:
                request["id"] = sent
                await stream.send_all(json.dumps(request).encode() + b"\n")
                sent += 1
                if sent % 64 == 0:
                    await trio.sleep(0.05)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)
    case.note = f"{sent} calls sent unread before mcpd dropped the connection"
    async with case.agent() as a:
        await ping(a)


async def faster_than_upstream(case: Case) -> None:
    async with case.agent() as a:
        replies: list[dict[str, Any]] = []

        async def call(i: int) -> None:
            replies.append(await a.call("mcp__bad__slow", f"q{i}", timeout=60))

        async with trio.open_nursery() as nursery:
            for i in range(600):
                nursery.start_soon(call, i)
                if i % 50 == 49:
                    await trio.sleep(0.05)
        ok = sum(text_of(r).startswith("slow:q") for r in replies)
        refused = sum("error" in r or is_error_result(r) for r in replies)
        assert ok + refused == len(replies) == 600
        case.note = f"{ok} answered by the server, {refused} refused at once (in-flight limit)"


async def oversized_line(case: Case) -> None:
    async with case.agent() as a:
        await ping(a)
        a.expect_null()  # "message exceeds the line limit; closing"
        try:
            line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"y" * (3 * MIB)
            await a.send_line(line)
        except trio.BrokenResourceError:
            pass  # mcpd stopped reading at the limit and hung up: that is the point
        with trio.fail_after(10):
            await a.closed.wait()


async def invalid_utf8_params(case: Case) -> None:
    async with case.agent() as a:
        a.expect("u1")  # answered under its own id, the bytes named
        await a.send_line(
            b'{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":'
            b'"mcp__steady__echo","arguments":{"text":"\xff\xfe"}}}'
        )
        await ping(a)


AgentBody = Callable[[Case], Awaitable[None]]
CASES: list[tuple[str, AgentBody, dict[str, Any]]] = [
    ("random bytes", random_bytes, {"log_expect": [AGENT_LOG + r".*not JSON-RPC"]}),
    ("a banner before JSON-RPC", banner_first, {"log_expect": [AGENT_LOG + r".*not JSON-RPC"]}),
    ("JSON nested 100k levels", deep_nesting, {"log_expect": [AGENT_LOG + r".*not JSON-RPC"]}),
    ("huge and invalid ids", huge_ids, {"log_expect": [AGENT_LOG + r".*not JSON-RPC"]}),
    ("non-string methods", non_string_methods, {"log_expect": [AGENT_LOG + r".*not JSON-RPC"]}),
    ("tools/call arguments that are not an object", arguments_not_an_object, {}),
    ("tool names of 1-8 MiB", huge_tool_name, {"rss_bound_mib": 48}),
    (
        "10,000 connections opened and abandoned",
        connection_storm,
        {
            "log_expect": [r"too many agent connections \(limit 100\).*pid \d+"],
            "daemon": {"max_connections": 100},
            "timeout": 120,
        },
    ),
    (
        "300 silent connections over a limit of 100",
        silent_connections,
        {
            "log_expect": [r"too many agent connections \(limit 100\)"],
            "daemon": {"max_connections": 100},
        },
    ),
    (
        "a line over the limit",
        oversized_line,
        {"log_expect": [AGENT_LOG + r".*line over"], "daemon": {"max_line_bytes": 2 * MIB}},
    ),
    (
        "invalid UTF-8 in params",
        invalid_utf8_params,
        {"log_expect": [AGENT_LOG + r".*UTF-8"]},
    ),
]

WITH_SERVER: list[tuple[str, AgentBody, dict[str, Any]]] = [
    (
        "never reads its replies",
        never_reads,
        {"log_expect": [AGENT_LOG + r".*stopped reading"], "rss_bound_mib": 64, "timeout": 120},
    ),
    (
        "requests faster than the server answers",
        faster_than_upstream,
        {"log_expect": [AGENT_LOG + r".*requests in flight, the limit"], "timeout": 120},
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "options"), CASES, ids=[c[0].replace(" ", "-") for c in CASES]
)
async def test_hostile_agent(name: str, body: AgentBody, options: dict[str, Any]) -> None:
    await run_case("agent", name, body, servers=lambda pids: {}, **options)


@pytest.mark.parametrize(
    ("name", "body", "options"), WITH_SERVER, ids=[c[0].replace(" ", "-") for c in WITH_SERVER]
)
async def test_hostile_agent_with_a_server(
    name: str, body: AgentBody, options: dict[str, Any]
) -> None:
    def servers(pids: Path) -> dict[str, Any]:
        return {"bad": hostile(pids, max_concurrency=4)}

    await run_case("agent", name, body, servers=servers, **options)
