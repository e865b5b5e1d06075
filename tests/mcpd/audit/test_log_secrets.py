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
from mcpd.audit.record import NAME_SHOWN
from mcpd.local.service.journal import JournalHandler, LineHandler
from mcpd.policy.redaction.cutparts import CUT_PART
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import curl
from tests.support.system.journald import decode_entry

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


def shows_part(text: str) -> bool:
    """Whether ``text`` shows the secret, or any beginning of it masking takes for one."""
    return any(SECRET[:n] in text for n in range(CUT_PART, len(SECRET) + 1))


async def test_a_cut_inside_a_secret_leaves_none_of_it_in_any_trace_of_the_call(
    tmp_path: Path, traces: Traces
) -> None:
    """mcpd cuts a made-up name, and a reason quoting one, where the record is made,
    and masks the record when it writes it: the secret's beginning before the cut is
    masked as the whole secret is."""
    servers = {"vault": {"command": sys.executable, "env": {"API_TOKEN": SECRET}, "enabled": False}}
    state = tmp_path / "state"
    cfg = make_config(tmp_path, servers, state_dir=str(state), audit_journal=True)
    tool = "x" * (NAME_SHOWN - 10) + SECRET + "y" * 300  # its name cut inside the secret
    # "Unknown prompt '...'" cut as a reason inside the secret; the name is cut past it.
    prompt = "p" * 170 + SECRET + "q" * 300
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            called = await agent.rpc("tools/call", {"name": tool, "arguments": {}})
            got = await agent.rpc("prompts/get", {"name": prompt})
            assert "error" in called or called["result"]["isError"]
            assert "error" in got
    records = [json.loads(line) for line in (state / FILE_NAME).read_text().splitlines()]
    lines = [line for line in traces.lines.getvalue().splitlines() if "call:" in line]
    entries = [e for e in traces.entries() if e.get("MCPD_EVENT") == "call"]
    assert len(records) == len(lines) == len(entries) == 2
    assert records[0]["name"].startswith("x" * (NAME_SHOWN - 10) + MARKER + "\u2026 (and ")
    assert records[1]["reason"].endswith(MARKER + "\u2026 (and 17 more characters)")
    shown = [json.dumps(r) for r in records] + lines + [json.dumps(e) for e in entries]
    assert [text for text in shown if shows_part(text)] == []
    assert all(MARKER in text for text in shown)


async def test_the_page_shows_no_part_of_a_secret_in_the_latest_calls(tmp_path: Path) -> None:
    """The page lists the latest records kept in memory, cutting long names: masked
    first, also with no file or journal to write them to."""
    servers = {"vault": {"command": sys.executable, "env": {"API_TOKEN": SECRET}, "enabled": False}}
    cfg = make_config(
        tmp_path, servers, state_dir=str(tmp_path / "state"), audit=False, audit_journal=False
    )
    tools = [SECRET, "x" * 100 + SECRET]  # the page cuts the second inside the secret
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                for name in tools:
                    await agent.rpc("tools/call", {"name": name, "arguments": {}})
            page = (await curl(daemon.socket_path, "/")).body.decode()
    section = page.split('<section id="calls">', 1)[1].split("</section>", 1)[0]
    assert section.count("[secret of servers.vault.env.API_TOKEN]") == 1
    assert "x" * 100 + "[secret of servers.v" in section
    assert not shows_part(section)
