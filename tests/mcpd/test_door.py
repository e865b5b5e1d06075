"""The agent socket's door: a peer that says nothing is let go, and a flood of refused
peers gets each its refusal but costs the log only a few lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio

from tests.support.agent import connect, make_config, running
from tests.support.peer_user import needs_root, peer_uid, run_as, shared_dir

# Connects argv[2] times, each time sends a ping, and prints the first line back.
MANY_PINGS = """
import contextlib, json, socket, sys
for i in range(int(sys.argv[2])):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sys.argv[1])
        req = {"jsonrpc": "2.0", "id": i, "method": "ping"}
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(json.dumps(req).encode() + bytes([10]))
        print(s.recv(65536).decode().splitlines()[0], flush=True)
"""
REFUSALS = 30


async def test_a_silent_connection_is_let_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_config(tmp_path, {}, max_connections=2, first_message_timeout=0.5)
    caplog.set_level(logging.INFO)
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            silent = [await trio.open_unix_socket(daemon.socket_path) for _ in range(2)]
            for stream in silent:
                async with stream:
                    assert await stream.receive_some(1024) == b""  # closed by the daemon
            # They held no slot once let go: the limit has room for an agent again.
            async with connect(daemon.socket_path) as agent:
                assert (await agent.rpc("ping"))["result"] == {}
    said = [r.getMessage() for r in caplog.records if "sent nothing within" in r.getMessage()]
    assert len(said) == 2 and "(daemon.first_message_timeout)" in said[0]


@needs_root
async def test_a_flood_of_refused_peers_is_logged_a_few_times(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uid = peer_uid()
    sock = shared_dir() / "mcpd.sock"
    cfg = make_config(tmp_path, {}, socket=str(sock), socket_mode="0666")
    caplog.set_level(logging.INFO)
    with trio.fail_after(60):
        async with running(cfg):
            out = await run_as(uid, MANY_PINGS, str(sock), str(REFUSALS))
    answers = [json.loads(line) for line in out.decode().splitlines()]
    assert len(answers) == REFUSALS
    assert all(f"uid {uid} may not use this socket" in a["error"]["message"] for a in answers)
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and f"connection from uid {uid}" in r.getMessage()
    ]
    assert 1 <= len(warned) <= 5, warned
