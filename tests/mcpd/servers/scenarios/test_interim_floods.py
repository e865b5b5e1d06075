"""A server answering with interim (1xx) responses without end, on its push stream and
on a call: each fails with the reason, the push stream's failure is said in the journal,
and another server's call answers meanwhile."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.http_servers.serving import LegacySession, Responder, SeenRequest, serve_http
from transports.http.connection import MAX_INTERIM

LIMIT = 30
PROCESSING = b"HTTP/1.1 102 Processing\r\n\r\n" * 1000
REASON = f"more than {MAX_INTERIM} interim (1xx) responses before the answer"


class PushFailed(logging.Handler):
    """Keeps the reasons the journal gives for a failed server-push stream."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: list[str] = []
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == "push_stream_failed":
            self.reasons.append(getattr(record, "mcpd_reason", ""))
            self.said.set()


async def test_interim_responses_without_end_fail_the_call_and_the_push_stream_not_others(
    tmp_path: Path,
) -> None:
    async def busy(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer to the probe
        elif req.method == "GET" or req.rpc_method == "tools/call":
            await respond.flood(PROCESSING)
        else:
            await respond.reply(405)

    tools: list[dict[str, Any]] = [{"name": "work", "inputSchema": {"type": "object"}}]
    journal = PushFailed()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            async with serve_http(LegacySession(busy, tools=tools)) as hostile:
                servers = {
                    "busy": {"url": hostile.url()},
                    "calm": {"command": sys.executable, "args": [HOSTILE_STDIO]},
                }
                cfg = make_config(tmp_path, servers, call_timeout=3600.0)
                async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                    await journal.said.wait()
                    failed = await agent.call("mcp__busy__work")
                    done = await agent.call("mcp__calm__echo", {"text": "hi"})
    finally:
        logger.removeHandler(journal)
    assert failed["isError"] is True
    assert REASON in failed["content"][0]["text"]
    assert REASON in journal.reasons[0]
    assert done["content"] == [{"type": "text", "text": "echo:hi"}]
