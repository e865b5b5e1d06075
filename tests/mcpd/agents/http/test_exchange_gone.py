"""A tools/call over HTTP whose client goes before its answer is written: the answer is
not sent, and the call's record says so (cancelled, as a call whose agent hangs up on
the socket), not ``ok``. A client that shuts its side of the connection after its
request is taken as gone, as nginx takes one: mcpd cannot tell the two apart without
writing."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import trio

from mcpd.agents.calls.callrecords import AGENT_GONE
from mcpd.audit.record import CallRecord
from mcpd.daemon import Daemon
from tests.support.clients.agent import META, make_config, running
from tests.support.daemons.reloading import wait_for
from tests.support.system.procs import scripted

LIMIT = 60
BIG = 8_000_000  # more than the socket's buffers hold: its write waits for the client


def call_request(tool: str) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": META},
    }
    data = json.dumps(body).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: mcpd\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def records_of(daemon: Daemon, tool: str) -> list[CallRecord]:
    return daemon.audit.recent(lambda r: r.name == tool, 10)


async def test_a_call_whose_answer_the_client_did_not_stay_for_is_recorded_as_cancelled(
    tmp_path: Path,
) -> None:
    """Its server answered, and the record said ``ok``, though the answer never reached
    the client: mcpd stopped writing it once the client had gone."""
    command, args = scripted("--big", str(BIG))
    servers = {"big": {"command": command, "args": list(args)}}
    cfg = make_config(tmp_path, servers, result_budget_chars=BIG + 1000)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await sock.connect(daemon.socket_path)
            stream = trio.SocketStream(sock)
            await stream.send_all(call_request("mcp__big__tool0"))
            # The answer has begun to come: the server answered, and mcpd writes it.
            assert (await stream.receive_some(64)).startswith(b"HTTP/1.1 200 ")
            await stream.aclose()  # gone, most of the answer unread

            await wait_for(lambda: records_of(daemon, "mcp__big__tool0"))
            [record] = records_of(daemon, "mcp__big__tool0")
            assert record.outcome == "cancelled"
            assert record.reason == f"{AGENT_GONE} (it was ok)"


async def test_a_client_that_shuts_its_side_after_its_request_is_taken_as_gone(
    tmp_path: Path,
) -> None:
    """Whether the hang-up is seen before its server answers (the call is cancelled
    there) or after (its answer is not written), the record says cancelled, never
    ``ok`` for an answer nobody got."""
    command, args = scripted()
    cfg = make_config(tmp_path, {"quick": {"command": command, "args": list(args)}})
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            for n in range(5):
                stream = await trio.open_unix_socket(daemon.socket_path)
                await stream.send_all(call_request("mcp__quick__tool1"))
                await stream.send_eof()
                assert await stream.receive_some(1024) == b""
                await stream.aclose()
                await wait_for(lambda n=n: len(records_of(daemon, "mcp__quick__tool1")) > n)
            outcomes = {r.outcome for r in records_of(daemon, "mcp__quick__tool1")}
            assert outcomes == {"cancelled"}
