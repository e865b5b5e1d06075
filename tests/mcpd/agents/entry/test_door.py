"""The agent socket's door: a peer that says nothing (or asks nothing) is let go, a
flood of refused peers gets each its refusal but costs the log only a few lines, and
no user allowed on some socket can take the connections of mcpd's own user, root or
the other users."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.entry import door
from mcpd.agents.entry.door import Door
from mcpd.agents.entry.peers import Peer
from mcpd.agents.entry.places import OWNER_RESERVE
from mcpd.config.tables.model import Config, DaemonConfig
from mcpd.policy.deciders.kin import Decider, Process
from tests.support.cli.on_socket import mcpd
from tests.support.clients.agent import connect, make_config, running
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, start_as
from tests.support.system.procs import scripted

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
# Opens argv[2] connections that each send a notification and a ping, keeps those
# answered, prints what happened as one line of JSON, and holds on until killed.
HOG = """
import contextlib, json, socket, sys, time
held, refusals = [], []
for i in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        s.sendall(b'{"jsonrpc":"2.0","method":"notifications/initialized"}' + bytes([10]))
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}' + bytes([10]))
    line = b""
    with contextlib.suppress(ConnectionResetError):
        while not line.endswith(bytes([10])) and (chunk := s.recv(4096)):
            line += chunk
    if b'"result"' in line:
        held.append(s)
    else:
        refusals.append(line.decode())
        s.close()
print(json.dumps({"held": len(held), "refusals": refusals}), flush=True)
time.sleep(600)
"""


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
                assert (await agent.rpc("ping"))["result"] == {"resultType": "complete"}
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


# Opens argv[2] connections at once, each sending a request as soon as it is open, then
# reads each to its end; prints what each read (or the error that ended its reading).
EAGER = """
import json, socket, sys
req = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode() + bytes([10])
opened = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    try:
        s.sendall(req)
        opened.append((s, ""))
    except OSError as exc:
        opened.append((s, "sending: " + type(exc).__name__))
read = []
for s, failed in opened:
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except OSError as exc:
        failed += " reading: " + type(exc).__name__
    read.append(failed or got.decode())
    s.close()
print(json.dumps(read))
"""


@needs_root
async def test_refused_peers_that_send_at_once_each_read_the_refusal(tmp_path: Path) -> None:
    uid = peer_uid()
    sock = shared_dir() / "mcpd.sock"
    cfg = make_config(tmp_path, {}, socket=str(sock), socket_mode="0666")
    with trio.fail_after(60):
        async with running(cfg):
            read = json.loads(await run_as(uid, EAGER, str(sock), "100"))
    assert len(read) == 100
    refusal = f"mcpd: uid {uid} may not use this socket: neither it nor one of its groups"
    for each in read:
        assert not each.startswith(("sending", " reading")), each
        assert json.loads(each)["error"]["message"].startswith(refusal), each


async def test_a_connection_that_asks_nothing_is_let_go_and_one_that_asked_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_config(tmp_path, {}, first_message_timeout=0.5)
    caplog.set_level(logging.INFO)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert (await agent.rpc("ping"))["result"] == {"resultType": "complete"}
            async with connect(daemon.socket_path) as idle:
                await idle.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
                await idle.closed.wait()  # closed by the daemon, its deadline passed
                said = idle.unmatched[0]["error"]["message"]
            assert "sent no request within 0.5 s" in said
            assert "(daemon.first_message_timeout)" in said
            # The agent that asked something came first, so its deadline passed too:
            # it is idle as long as it likes.
            assert (await agent.rpc("ping"))["result"] == {"resultType": "complete"}
    logged = [r.getMessage() for r in caplog.records if "sent no request" in r.getMessage()]
    assert len(logged) == 1


def hog_config(tmp_path: Path, shared: Path, uids: list[int], **daemon: int) -> Config:
    """A profile with a socket of its own that ``uids`` may use."""
    profile = {"servers": ["*"], "socket": str(shared / "p.sock"), "socket_mode": "0666"}
    profile["allow_uids"] = uids
    command, args = scripted("--tools", "1")
    servers = {"s": {"command": command, "args": list(args)}}
    return make_config(
        tmp_path, servers, socket=str(shared / "mcpd.sock"), profiles={"p": profile}, **daemon
    )


@contextlib.asynccontextmanager
async def hogging(uid: int, sock: Path, count: int) -> AsyncIterator[dict[str, Any]]:
    """``HOG`` as ``uid`` on ``sock``: what it got, while it holds its connections."""
    proc = await start_as(uid, HOG, str(sock), str(count))
    try:
        assert proc.stdout is not None
        out = b""
        while not out.endswith(b"\n"):
            chunk = await proc.stdout.receive_some(1 << 16)
            assert chunk, "the hog ended before it said what it got"
            out += chunk
        yield json.loads(out)
    finally:
        proc.kill()
        await proc.wait()


async def refusal(sock: Path) -> str:
    """Why the daemon refuses one more connection on ``sock``."""
    async with await trio.open_unix_socket(str(sock)) as stream:
        line = await stream.receive_some(4096)
    message: str = json.loads(line)["error"]["message"]
    return message


@needs_root
async def test_one_user_cannot_take_the_connections_of_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uid, other = peer_uid(), peer_uid() + 1
    shared = shared_dir()
    cfg = hog_config(tmp_path, shared, [uid, other])
    caplog.set_level(logging.INFO)
    with trio.fail_after(120):
        async with running(cfg), hogging(uid, shared / "p.sock", 260) as got:
            # Root, on the daemon's socket and on the profile's, and another user.
            assert "mcpd" in await mcpd(shared / "mcpd.sock", "status")
            async with connect(str(shared / "p.sock")) as agent:
                assert (await agent.rpc("ping"))["result"] == {"resultType": "complete"}
            answer = json.loads(await run_as(other, MANY_PINGS, str(shared / "p.sock"), "1"))
            assert answer["result"] == {}
            quota = cfg.daemon.max_connections // 4
            assert got["held"] == quota
            assert len(got["refusals"]) == 260 - quota
            refusal = json.loads(got["refusals"][-1])["error"]["message"]
            assert f"uid {uid} has {quota} connections to mcpd open" in refusal
            assert "daemon.max_connections_per_uid" in refusal
    warned = [r.getMessage() for r in caplog.records if "max_connections_per_uid" in r.getMessage()]
    assert 1 <= len(warned) <= 5, warned


@needs_root
async def test_the_owner_gets_in_when_others_hold_every_shared_place(tmp_path: Path) -> None:
    uid = peer_uid()
    shared = shared_dir()
    cfg = hog_config(tmp_path, shared, [uid], max_connections=8, max_connections_per_uid=100)
    with trio.fail_after(120):
        async with running(cfg), hogging(uid, shared / "p.sock", 10) as got:
            assert got["held"] == 8
            assert all("too many connections (limit 8)" in r for r in got["refusals"])
            assert len(got["refusals"]) == 2
            assert "mcpd" in await mcpd(shared / "mcpd.sock", "status")
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(OWNER_RESERVE):
                    agent = await stack.enter_async_context(connect(str(shared / "mcpd.sock")))
                    assert (await agent.rpc("ping"))["result"] == {"resultType": "complete"}
            # The places kept for the owner are on the daemon's own socket only.
            refused = await refusal(shared / "p.sock")
            assert "kept for mcpd's own user and root are on mcpd's own socket" in refused


async def test_a_peer_of_another_pid_namespace_is_let_in_with_no_process_to_go_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel gives pid 0 for a process of another PID namespace: nothing of it can
    be read, so a decider of its user on the socket cannot be told from its child."""
    me = os.getuid()
    monkeypatch.setattr(door, "peer_of", lambda sock: Peer(0, me, os.getgid()))
    gate = Door(DaemonConfig, lambda profile: ((), ()), lambda pid: None, lambda s, p: None)
    ours, theirs = trio.socket.socketpair()
    with trio.fail_after(10), ours, theirs:
        seat = await gate.check(trio.SocketStream(ours), None)
        assert seat is not None and seat.peer is not None
        with seat:
            assert seat.peer.unverified
            kin = seat.peer.kin
            assert kin.unknown == "the kernel gave no pid of it: it runs in another PID namespace"
            assert kin.tie(Decider((Process(7),), uid=me)) == ("unknown", None)
