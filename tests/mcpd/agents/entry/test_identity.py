"""Who an agent connection is for the policy and the audit log: the kernel's word on
its process, the program it runs (read once), and an id of its own; in a legacy HTTP
session, each request is the process on its own connection, under the session's id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcpd.agents.entry import identity
from mcpd.agents.entry.identity import AgentIdentity, Holder, new_connection_id
from mcpd.agents.entry.peers import Peer
from mcpd.audit.reader import AuditRecords
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import modern
from tests.support.system.procs import scripted


def me() -> Peer:
    return Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())


def test_a_connection_is_its_process_and_program() -> None:
    info = AgentIdentity(me()).info("default", modern=False)
    assert (info.uid, info.pid, info.profile, info.era) == (
        os.getuid(),
        os.getpid(),
        "default",
        "legacy",
    )
    assert info.exe == os.path.basename(os.path.realpath(sys.executable))


def test_a_caller_nothing_is_known_of_has_no_uid_pid_or_program() -> None:
    info = AgentIdentity(None).info("default", modern=True)
    assert (info.uid, info.pid, info.exe, info.era) == (None, None, None, "modern")


@pytest.mark.parametrize("pid", [0, -1])
def test_a_process_of_another_pid_namespace_is_not_looked_up(
    pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def looked_up(pid: int) -> str:
        raise AssertionError(f"/proc/{pid} read")

    monkeypatch.setattr(identity, "exe_of", looked_up)
    info = AgentIdentity(Peer(pid=pid, uid=1000, gid=1000, unverified=True)).info("p", True)
    assert (info.uid, info.pid, info.exe) == (1000, None, None)


def test_the_program_is_read_once_and_the_profile_and_era_follow_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def exe_of(pid: int) -> str:
        reads.append(pid)
        return "agent"

    monkeypatch.setattr(identity, "exe_of", exe_of)
    who = AgentIdentity(Peer(pid=4242, uid=1, gid=1))
    first = who.info("default", modern=False)
    assert who.info("default", modern=False) is first
    other = who.info("work", modern=True)
    assert (other.profile, other.era, other.exe, other.connection) == (
        "work",
        "modern",
        "agent",
        first.connection,
    )
    assert reads == [4242]


def test_after_a_profile_switch_calls_of_either_era_are_in_the_new_profile() -> None:
    who = AgentIdentity(None)
    assert who.info("default", modern=False).profile == "default"
    assert who.info("default", modern=True).profile == "default"
    assert who.info("work", modern=True).profile == "work"
    legacy = who.info("work", modern=False)
    assert (legacy.profile, legacy.era) == ("work", "legacy")
    modern = who.info("work", modern=True)
    assert (modern.profile, modern.era) == ("work", "modern")


def test_whose_its_calls_are_is_its_process_and_user_and_never_a_servers_the_owners() -> None:
    """What the calls waiting for their servers are counted against: mcpd's own user
    has no user's share, but a process of one of its servers, of the same uid, has."""
    mine = AgentIdentity(me()).whose()
    assert (mine.uid, mine.pid, mine.own) == (os.getuid(), os.getpid(), True)
    server = Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), server="notes")
    assert not AgentIdentity(server).whose().own
    other = AgentIdentity(Peer(pid=0, uid=os.getuid() + 1, gid=0, unverified=True)).whose()
    assert (other.uid, other.pid, other.own) == (os.getuid() + 1, None, False)
    held = AgentIdentity(None, Holder(uid=os.getuid() + 1, pid=7)).whose()
    assert (held.uid, held.pid, held.own) == (os.getuid() + 1, 7, False)
    assert AgentIdentity(None).whose().agent == "endpoint"


def test_a_request_in_a_session_is_its_connections_process_under_the_sessions_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def exe_of(pid: int) -> str:
        reads.append(pid)
        return f"agent{pid}"

    monkeypatch.setattr(identity, "exe_of", exe_of)
    session = AgentIdentity(Peer(pid=100, uid=1, gid=1)).new_session()
    sender = AgentIdentity(Peer(pid=200, uid=1, gid=1))
    first = sender.in_session(session).info("default", modern=False)
    again = sender.in_session(session).info("default", modern=False)
    assert (first.pid, first.exe, first.connection) == (200, "agent200", session.connection)
    assert again == first
    assert sender.in_session(session).whose().pid == 200
    assert reads == [200]  # once for the connection, not for each request


def test_each_connection_has_an_id_of_its_own() -> None:
    ids = {AgentIdentity(None).connection for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(new_connection_id()) == 8


# Posts argv[3] (a tools/call) to the endpoint at 127.0.0.1:argv[1] with the token
# argv[2], and prints the answer's status line.
CALL_OVER_TCP = """
import socket, sys
body = sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("POST /mcp HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n"
           "Authorization: Bearer " + sys.argv[2] + "\\r\\n"
           "Content-Type: application/json\\r\\nAccept: application/json, text/event-stream\\r\\n"
           "MCP-Protocol-Version: 2026-07-28\\r\\nMcp-Method: tools/call\\r\\nMcp-Name: nope\\r\\n"
           "Content-Length: " + str(len(body)) + "\\r\\n\\r\\n").encode() + body)
got = b""
while chunk := s.recv(65536):
    got += chunk
print(got.split(b"\\r\\n")[0].decode())
"""


async def test_a_call_over_the_endpoint_is_recorded_as_the_process_that_made_it(
    tmp_path: Path,
) -> None:
    """Every call over the endpoint was recorded with no uid, pid or program, though
    mcpd had looked up who held its connection for the token."""
    command, args = scripted("--tools", "1")
    cfg = make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    call = json.dumps(modern(1, "tools/call", {"name": "nope", "arguments": {}}))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = str(daemon.agent_server.endpoint.port)
            child = await trio.lowlevel.open_process(
                [sys.executable, "-c", CALL_OVER_TCP, port, daemon.http_token(), call],
                stdout=subprocess.PIPE,
            )
            assert child.stdout is not None
            said = b""
            while chunk := await child.stdout.receive_some():
                said += chunk
            await child.wait()
            assert said.startswith(b"HTTP/1.1 "), said
            await daemon.audit.flush()
            records = [r for r in AuditRecords(str(tmp_path / "state")) if r.name == "nope"]
    assert records, "no record of the call"
    agent = records[0].agent
    assert (agent.uid, agent.pid) == (os.getuid(), child.pid)
    assert agent.exe == os.path.basename(os.path.realpath(sys.executable))


# argv: where (the socket's path, or the endpoint's port), the endpoint's token (or ""),
# the session's id ("" opens one first, and prints it), then the tools to call in it.
# Prints the session's id, then each answer's status.
IN_A_SESSION = """
import json, socket, sys
where, token, sid, *tools = sys.argv[1:]
def post(body):
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(where)
    else:
        s = socket.create_connection(("127.0.0.1", int(where)))
    data = json.dumps(body).encode()
    head = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
            "Content-Type: application/json", "Accept: application/json, text/event-stream",
            "MCP-Protocol-Version: 2025-06-18", "Content-Length: " + str(len(data))]
    if token:
        head.append("Authorization: Bearer " + token)
    if sid:
        head.append("Mcp-Session-Id: " + sid)
    s.sendall(("\\r\\n".join(head) + "\\r\\n\\r\\n").encode() + data)
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got.decode("latin-1").split("\\r\\n\\r\\n")[0].split("\\r\\n")
if not sid:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "t", "version": "1"}}
    head = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    sid = next(h.split(":", 1)[1].strip() for h in head if h.lower().startswith("mcp-session-id:"))
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
print(sid)
for i, tool in enumerate(tools, 1):
    call = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}
    print(post(call)[0])
"""


async def in_a_session(where: str, token: str, sid: str, *tools: str) -> tuple[int, str]:
    """Run ``IN_A_SESSION`` as a process of its own: its pid and the session's id."""
    child = await trio.lowlevel.open_process(
        [sys.executable, "-c", IN_A_SESSION, where, token, sid, *tools], stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    said = b""
    while chunk := await child.stdout.receive_some():
        said += chunk
    assert await child.wait() == 0
    lines = said.decode().splitlines()
    assert lines[1:] == ["HTTP/1.1 200 OK"] * len(tools), lines
    return child.pid, lines[0]


@pytest.mark.parametrize("endpoint", [False, True], ids=["socket", "endpoint"])
async def test_each_call_of_a_legacy_session_is_recorded_as_the_process_that_made_it(
    tmp_path: Path, endpoint: bool
) -> None:
    """Two processes send in one legacy HTTP session, the one that opened it and one
    given its id: each call is recorded with the pid of the process whose connection
    carried it, and with the session's id, which what is approved for it is kept
    under. The calls were all recorded as the process that opened the session."""
    command, args = scripted("--tools", "2")
    cfg = make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            token = ""
            where = str(tmp_path / "mcpd.sock")
            if endpoint:
                assert daemon.agent_server.endpoint is not None
                where, token = str(daemon.agent_server.endpoint.port), daemon.http_token()
            opener, sid = await in_a_session(where, token, "", "mcp__code__tool0")
            other, _ = await in_a_session(where, token, sid, "mcp__code__tool1")
            await daemon.audit.flush()
            records = {r.name: r.agent for r in AuditRecords(str(tmp_path / "state"))}
    first, second = records["mcp__code__tool0"], records["mcp__code__tool1"]
    assert (first.uid, first.pid) == (os.getuid(), opener)
    assert (second.uid, second.pid) == (os.getuid(), other)
    assert second.exe == os.path.basename(os.path.realpath(sys.executable))
    assert first.connection == second.connection
