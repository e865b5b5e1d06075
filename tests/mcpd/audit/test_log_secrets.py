"""A secret mcpd holds that an agent writes into what it calls (a tool's name, a
resource's URI) shows in none of the call's traces: not in its log line, its journal
entry or its record in ``calls.jsonl``, where the marker naming whose secret it was
stands instead, as in every other line mcpd logs."""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.audit.log import FILE_NAME
from mcpd.local.journal import JournalHandler, LineHandler
from tests.support.agent import connect, make_config, running
from tests.support.journald import decode_entry

SECRET = "held-secret-value-0123456789"
MARKER = "[secret of servers.vault.env.API_TOKEN]"
LIMIT = 60


class Traces:
    """What mcpd's own handlers write: log lines, and journal entries as received."""

    def __init__(self, directory: Path) -> None:
        self.lines = io.StringIO()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(directory / "journal"))
        self.sock.setblocking(False)
        self.handlers = [LineHandler(self.lines), JournalHandler(str(directory / "journal"))]

    def entries(self) -> list[dict[str, str]]:
        out = []
        while True:
            try:
                out.append(decode_entry(self.sock.recv(1 << 16)))
            except BlockingIOError:
                return out


@pytest.fixture
def traces(tmp_path: Path) -> Iterator[Traces]:
    found = Traces(tmp_path)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    for handler in found.handlers:
        root.addHandler(handler)
    try:
        yield found
    finally:
        for handler in found.handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
        found.sock.close()


async def test_a_secret_an_agent_writes_in_a_name_shows_in_no_trace_of_the_call(
    tmp_path: Path, traces: Traces
) -> None:
    servers = {
        # Never started: only the secret it would be given matters.
        "vault": {"command": sys.executable, "env": {"API_TOKEN": SECRET}, "enabled": False}
    }
    state = tmp_path / "state"
    cfg = make_config(tmp_path, servers, state_dir=str(state), audit_journal=True)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            called = await agent.rpc("tools/call", {"name": f"x_{SECRET}", "arguments": {}})
            read = await agent.rpc("resources/read", {"uri": f"file:///{SECRET}"})
            assert "error" in called or called["result"]["isError"]
            assert "error" in read
    records = [json.loads(line) for line in (state / FILE_NAME).read_text().splitlines()]
    lines = [line for line in traces.lines.getvalue().splitlines() if "call:" in line]
    entries = [e for e in traces.entries() if e.get("MCPD_EVENT") == "call"]
    assert len(records) == len(lines) == len(entries) == 2
    assert [r["name"] for r in records] == [f"x_{MARKER}", f"file:///{MARKER}"]
    shown = [json.dumps(r) for r in records] + lines + [json.dumps(e) for e in entries]
    assert [text for text in shown if SECRET in text] == []
    assert all(MARKER in text for text in shown)
