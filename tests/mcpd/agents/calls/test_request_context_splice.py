"""Calls on the splice path keep what the general path gives agents and servers.

The splice works out a connection's request context once per distinct ``_meta`` and
keeps it by its bytes; a call whose ``_meta`` holds only that context goes upstream
with mcpd's own envelope, one with a progress token with mcpd's token in it. These
tests send the same lines with the splice on and off, and look at what the server was
sent (its ``mirror`` tool echoes its params) and what the agent got.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import MODERN, make_config, running
from tests.support.parts.splicing import record_spliced_requests
from tests.support.system.procs import scripted

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(rid: int, meta: Any, name: str = "mcp__m__mirror") -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": {"text": f"call {rid}"}}
    if meta is not None:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return json.dumps(body).encode() + b"\n"


LINES = [
    call(1, ENVELOPE),
    call(2, {**ENVELOPE, "progressToken": "t-2"}),
    call(3, ENVELOPE),  # the same bytes as the first: its kept context
    call(4, {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"roots": {}}}),
    call(5, {**ENVELOPE, "com.example/trace": "abc"}),
    call(6, 5),  # _meta that is not an object
    call(7, ["x"]),
    call(8, {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}),
    call(9, {"io.modelcontextprotocol/clientCapabilities": {}}),  # no version, no session
    call(10, ENVELOPE, name="mcp__m__nope"),
    call(11, {**ENVELOPE, "progressToken": 11}),
    call(12, ENVELOPE),
]


async def replies(path: str) -> dict[int, Any]:
    stream = await trio.open_unix_socket(path)
    got: dict[int, Any] = {}
    buf = b""
    async with stream:
        await stream.send_all(b"".join(LINES))
        while len(got) < len(LINES):
            data = await stream.receive_some(1 << 16)
            assert data, "the daemon closed the connection"
            buf += data
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                msg = json.loads(line)
                if "id" in msg:
                    got[msg["id"]] = msg
    return got


def sent_upstream(reply: dict[str, Any]) -> Any:
    """What the mirror tool says it was sent."""
    return json.loads(reply["result"]["content"][0]["text"])


async def test_the_splice_gives_what_the_general_path_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, args = scripted("--names", "mirror", "--progress", "1")
    cfg = make_config(tmp_path, {"m": {"command": cmd, "args": list(args)}}, health_interval=0)
    built = record_spliced_requests(monkeypatch)
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            spliced = await replies(daemon.socket_path)
        took = list(built)
        async with running(cfg, splice=False) as daemon:
            general = await replies(daemon.socket_path)
    assert spliced == general
    # Spliced upstream: the three plain calls and the two with only a token.
    assert len(took) == 5 and sum(t is not None for t in took) == 2, took
    assert len(built) == len(took)  # and none with the splice off
    # What the server saw: mcpd's envelope, the agent's own keys and a token of mcpd's.
    plain = sent_upstream(spliced[1])["_meta"]
    assert plain["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert "progressToken" not in plain
    assert sent_upstream(spliced[2])["_meta"]["progressToken"] == "(a token)"
    assert sent_upstream(spliced[3])["_meta"] == plain
    assert sent_upstream(spliced[4])["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "roots": {}
    }
    assert sent_upstream(spliced[5])["_meta"]["com.example/trace"] == "abc"
    assert sent_upstream(spliced[11])["_meta"]["progressToken"] == "(a token)"
    assert sent_upstream(spliced[12])["_meta"] == plain
    # What the agent was refused, and why.
    assert spliced[6]["error"]["code"] == spliced[7]["error"]["code"] == -32602
    assert "_meta" in spliced[6]["error"]["message"]
    assert spliced[8]["error"]["code"] == -32022
    assert spliced[8]["error"]["data"]["requested"] == "1999-01-01"
    assert spliced[9]["error"]["code"] == -32602
    assert "protocolVersion" in spliced[9]["error"]["message"]
    assert spliced[10]["result"]["isError"] is True
