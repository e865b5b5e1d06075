"""`mcpd serve` stopped (SIGTERM, as `systemctl stop` sends it) while it waits on a
server that keeps it waiting: during a reload that waits for a call in flight to end,
and during a start that waits for a server's greeting. The stop comes first: mcpd says
it stops and exits while the server still holds the call or the greeting."""

from __future__ import annotations

import json
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from protocol.mcp import core as mcp
from tests.conftest import ROOT
from tests.support.clients.daemon_http import MCP, Reply, modern, modern_headers
from tests.support.daemons.served import Agent, Served

pytestmark = pytest.mark.timeout(90)

HOLDING = str(ROOT / "tests" / "support" / "servers" / "holding.py")
# Long enough that nothing waits it out during a test: what ends a wait is the stop.
LONG = 3600


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-sb-") as d:
        yield Path(d)


def _daemon(directory: Path, **keys: float) -> str:
    lines = [f'socket = "{directory}/mcpd.sock"', f'state_dir = "{directory}/state"']
    lines += [f"{key} = {value}" for key, value in keys.items()]
    return "[daemon]\n" + "\n".join(lines) + "\n"


def _holding(env: str, *args: str) -> str:
    return (
        "[servers.slow]\n"
        f'command = "{sys.executable}"\n'
        f"args = {json.dumps([HOLDING, *args])}\n"
        f'env = {{ A = "{env}" }}\n'
        'sandbox = "off"\n'
    )


def test_a_stop_during_a_reload_waiting_on_a_call_in_flight_stops_at_once(
    short_dir: Path,
) -> None:
    served = Served(short_dir, _daemon(short_dir, call_timeout=LONG) + _holding("1"))
    agent = None
    try:
        served.notify.next_with("READY=1", timeout=60)
        agent = Agent(served.socket)
        agent.call(1, "mcp__slow__hold")
        served.until("holding call 1")
        # The server's env changes: the reload starts it again once its call ends.
        served.config.write_text(_daemon(short_dir, call_timeout=LONG) + _holding("2"))
        served.proc.send_signal(signal.SIGHUP)
        served.notify.next_with("RELOADING=1")
        served.proc.send_signal(signal.SIGTERM)
        served.notify.next_with("STOPPING=1")
        assert served.exited() == 0, served.log
        (answer,) = agent.until_eof()
    finally:
        if agent is not None:
            agent.close()
        served.close()
    log = "".join(served.log)
    assert "stopping" in log, log
    assert "Traceback" not in log, log
    # The server never answered: what the agent got is mcpd's word that it stops.
    assert answer["id"] == 1 and answer["result"]["isError"] is True, answer


def test_a_stop_during_a_start_waiting_on_a_greeting_stops_at_once(short_dir: Path) -> None:
    served = Served(short_dir, _daemon(short_dir, startup_deadline=LONG) + _holding("1", "--deaf"))
    try:
        served.until("deaf")
        served.proc.send_signal(signal.SIGTERM)
        served.notify.next_with("STOPPING=1")
        assert served.exited() == 0, served.log
    finally:
        served.close()
    log = "".join(served.log)
    assert "stopping" in log, log
    assert "listening on" not in log, log
    assert "Traceback" not in log, log


def test_every_request_in_flight_is_answered_once_before_mcpd_stops(short_dir: Path) -> None:
    """Calls held by their server, and those waiting for one of its slots (a stdio
    server takes 4 at a time), each get one answer that says mcpd stops, then EOF."""
    served = Served(short_dir, _daemon(short_dir, call_timeout=LONG) + _holding("1"))
    agent = None
    count = 20
    try:
        served.notify.next_with("READY=1", timeout=60)
        agent = Agent(served.socket)
        for rid in range(1, count + 1):
            agent.call(rid, "mcp__slow__hold")
        served.until("holding call 4")
        served.proc.send_signal(signal.SIGTERM)
        answers = agent.until_eof()
        assert served.exited() == 0, served.log
    finally:
        if agent is not None:
            agent.close()
        served.close()
    ids = sorted(answer["id"] for answer in answers if "id" in answer)
    assert ids == list(range(1, count + 1)), answers
    for answer in answers:
        result = answer["result"]
        assert result["isError"] is True, answer
        text = result["content"][0]["text"]
        assert "mcpd is stopping" in text and "whether it ran is not known" in text, text


_CLI_META = msgspec.to_builtins(
    mcp.request_meta(mcp.LATEST_MODERN, {}, mcp.Implementation(name="cli", version="1"))
)


def _waiting_for_a_person(path: Path) -> None:
    """Once a call waits for a person's approval (asked on a connection of the
    operator's, as ``mcpd approvals`` asks)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, sock.makefile("rwb") as f:
        sock.connect(str(path))
        version = 0
        while True:
            watch = {"after": version, "wait": 60, "_meta": _CLI_META}
            request = {"jsonrpc": "2.0", "id": 1, "method": "mcpd/approvals/watch", "params": watch}
            f.write(json.dumps(request).encode() + b"\n")
            f.flush()
            reply = json.loads(f.readline())
            assert "result" in reply, reply
            listing = reply["result"]
            if listing["approvals"]:
                return
            version = listing["version"]


def test_a_call_waiting_for_approval_is_told_at_a_stop_that_it_was_not_sent(
    short_dir: Path,
) -> None:
    """It never reached its server: the agent may make it again, with nothing to check."""
    rule = '[[policy]]\nservers = ["slow"]\naction = "ask"\ndecider = "operator"\n'
    served = Served(short_dir, _daemon(short_dir, call_timeout=LONG) + _holding("1") + rule)
    agent = None
    try:
        served.notify.next_with("READY=1", timeout=60)
        agent = Agent(served.socket)
        agent.call(7, "mcp__slow__hold")
        _waiting_for_a_person(served.socket)
        served.proc.send_signal(signal.SIGTERM)
        answers = agent.until_eof()
        assert served.exited() == 0, served.log
    finally:
        if agent is not None:
            agent.close()
        served.close()
    (answer,) = answers
    assert answer["id"] == 7 and answer["result"]["isError"] is True, answer
    text = answer["result"]["content"][0]["text"]
    assert "mcpd is stopping" in text and "not sent" in text, text
    assert "may have reached" not in text, text


def test_a_call_in_flight_over_http_is_answered_before_mcpd_stops(short_dir: Path) -> None:
    """On ``/mcp`` as on a line connection: the call its server holds gets mcpd's word
    that it stops, as the response to its POST, before the connection closes."""
    served = Served(short_dir, _daemon(short_dir, call_timeout=LONG) + _holding("1"))
    try:
        served.notify.next_with("READY=1", timeout=60)
        body = json.dumps(modern(5, "tools/call", {"name": "mcp__slow__hold", "arguments": {}}))
        head = [
            "POST /mcp HTTP/1.1",
            "Host: mcpd",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in MCP.items()),
            *modern_headers("tools/call", "mcp__slow__hold"),
        ]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(served.socket))
            sock.sendall(("\r\n".join(head) + "\r\n\r\n" + body).encode())
            served.until("holding call 1")
            served.proc.send_signal(signal.SIGTERM)
            raw = b""
            while chunk := sock.recv(1 << 16):
                raw += chunk
        assert served.exited() == 0, served.log
    finally:
        served.close()
    assert raw, "the connection closed with no response"
    reply = Reply(raw)
    assert reply.status == 200, raw
    (answer,) = reply.events() if b"event-stream" in raw else [reply.json()]
    assert answer["id"] == 5 and answer["result"]["isError"] is True, answer
    text = answer["result"]["content"][0]["text"]
    assert "mcpd is stopping" in text and "whether it ran is not known" in text, text
