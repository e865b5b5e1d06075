"""A server flooding the stream of a call with notifications, its stdout with a line
that never ends, or either of its pipes with blank lines, is read more slowly than it
sends: `mcpd status` names it as held back and says why, and a call to another server
goes through meanwhile."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    event,
    notification,
    result,
    serve_http,
)
from tests.support.parts.status_rows import status_text
from transports.stdio.process.stderr import RECORD_BYTES

LIMIT = 30
NOTE = event(notification("notifications/message", {"level": "debug", "data": "x"}))


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


class HeldBack(logging.Handler):
    """Sets ``said`` once the journal says a server is being held back."""

    def __init__(self) -> None:
        super().__init__()
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == "held_back":
            self.said.set()


async def test_a_flooding_server_is_shown_held_back_and_another_servers_call_goes_through(
    tmp_path: Path,
) -> None:
    async def flooding(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer to the probe
        elif req.rpc_method == "tools/call":
            await respond.sse_start()
            while True:  # notifications about the call, and never its answer
                await respond.send(NOTE * 100)
        else:
            await respond.reply(405)

    async def calm(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "server/discover":
            found = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            await respond.json(result(req.rpc_id, {**found, "resultType": "complete"}))
        elif req.rpc_method == "tools/list":
            await respond.json(result(req.rpc_id, {"tools": [tool("ask")]}))
        elif req.rpc_method == "tools/call":
            await respond.json(result(req.rpc_id, {"content": [{"type": "text", "text": "ok"}]}))
        else:
            await respond.reply(405)

    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            async with (
                serve_http(LegacySession(flooding, tools=[tool("spill")])) as flood,
                serve_http(calm) as other,
            ):
                servers = {
                    "flood": {"url": flood.url(), "read_budget": 100},
                    "calm": {"url": other.url()},
                }
                cfg = make_config(tmp_path, servers)
                async with (
                    running(cfg) as daemon,
                    connect(daemon.socket_path) as flooded,
                    connect(daemon.socket_path) as agent,
                    trio.open_nursery() as nursery,
                ):
                    nursery.start_soon(flooded.call, "mcp__flood__spill")
                    await journal.said.wait()
                    status = await agent.result("mcpd/status")
                    rows = {row["alias"]: row for row in status["servers"]}
                    held = rows["flood"]["held_back"]
                    assert (
                        "it sends more than mcpd reads of what answers no request"
                        in (held["reason"])
                    )
                    assert held["since"]
                    assert rows["calm"]["held_back"] is None
                    done = await agent.call("mcp__calm__ask")
                    assert done["content"] == [{"type": "text", "text": "ok"}]
                    nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(journal)


async def test_a_stdio_server_writing_a_line_that_never_ends_is_held_back_and_another_answers(
    tmp_path: Path,
) -> None:
    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            servers = {
                "endless": {"command": sys.executable, "args": [HOSTILE_STDIO], "read_budget": 100},
                "calm": {"command": sys.executable, "args": [HOSTILE_STDIO]},
            }
            async with (
                running(make_config(tmp_path, servers)) as daemon,
                connect(daemon.socket_path) as flooded,
                connect(daemon.socket_path) as agent,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(flooded.call, "mcp__endless__endless_line")
                await journal.said.wait()
                shown = status_text(await agent.result("mcpd/status")).splitlines()
                at = next(i for i, row in enumerate(shown) if row.startswith("endless "))
                held = [i for i, row in enumerate(shown) if "held back|" in row]
                assert held == [at + 1]  # under the server, and no other
                assert "more than mcpd reads of what answers no request" in shown[at + 1]
                done = await agent.call("mcp__calm__echo", {"text": "hi"})
                assert done["content"] == [{"type": "text", "text": "echo:hi"}]
                nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(journal)


@pytest.mark.parametrize("tool", ["blank_flood", "stderr_blank_flood"])
async def test_a_stdio_server_writing_blank_lines_without_end_is_held_back_and_another_answers(
    tmp_path: Path, tool: str
) -> None:
    # Dropped unread, blank lines are read all the same: each counts as a line.
    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            servers = {
                "blank": {"command": sys.executable, "args": [HOSTILE_STDIO], "read_budget": 100},
                "calm": {"command": sys.executable, "args": [HOSTILE_STDIO]},
            }
            async with (
                running(make_config(tmp_path, servers)) as daemon,
                connect(daemon.socket_path) as flooded,
                connect(daemon.socket_path) as agent,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(flooded.call, f"mcp__blank__{tool}")
                await journal.said.wait()
                status = await agent.result("mcpd/status")
                rows = {row["alias"]: row for row in status["servers"]}
                held = rows["blank"]["held_back"]
                assert "more than mcpd reads of what answers no request" in held["reason"]
                assert rows["calm"]["held_back"] is None
                done = await agent.call("mcp__calm__echo", {"text": "hi"})
                assert done["content"] == [{"type": "text", "text": "echo:hi"}]
                nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(journal)


class StderrRecords(logging.Handler):
    """The sizes of the records of a server's stderr, as they reach the log."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == "stderr":
            self.sizes.append(len(record.getMessage().encode()))


async def test_a_server_flooding_its_stderr_is_held_back_in_records_of_a_few_kib_another_answers(
    tmp_path: Path,
) -> None:
    journal, records = HeldBack(), StderrRecords()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with trio.fail_after(LIMIT):
            flooding = [HOSTILE_STDIO, "--stderr-seconds", "60"]
            servers = {
                "noisy": {"command": sys.executable, "args": flooding, "read_budget": 100},
                "calm": {"command": sys.executable, "args": [HOSTILE_STDIO]},
            }
            async with (
                running(make_config(tmp_path, servers)) as daemon,
                connect(daemon.socket_path) as flooded,
                connect(daemon.socket_path) as agent,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(flooded.call, "mcp__noisy__stderr_flood")
                await journal.said.wait()
                shown = status_text(await agent.result("mcpd/status")).splitlines()
                at = next(i for i, row in enumerate(shown) if row.startswith("noisy "))
                assert "its stderr" in shown[at + 1]
                done = await agent.call("mcp__calm__echo", {"text": "hi"})
                assert done["content"] == [{"type": "text", "text": "echo:hi"}]
                nursery.cancel_scope.cancel()
    finally:
        logger.setLevel(level)
        logger.removeHandler(journal)
        logger.removeHandler(records)
    assert records.sizes
    assert max(records.sizes) <= RECORD_BYTES
