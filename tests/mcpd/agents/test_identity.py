"""Who an agent connection is for the policy and the audit log: the kernel's word on
its process, the program it runs (read once), and an id of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcpd.agents import identity
from mcpd.agents.identity import Identity, new_connection_id
from mcpd.agents.peers import Peer
from mcpd.audit.reader import Reading
from tests.support.agent import make_config, running
from tests.support.daemon_http import modern
from tests.support.procs import scripted


def me() -> Peer:
    return Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())


def test_a_connection_is_its_process_and_program() -> None:
    info = Identity(me()).info("default", modern=False)
    assert (info.uid, info.pid, info.profile, info.era) == (
        os.getuid(),
        os.getpid(),
        "default",
        "legacy",
    )
    assert info.exe == os.path.basename(os.path.realpath(sys.executable))


def test_a_caller_nothing_is_known_of_has_no_uid_pid_or_program() -> None:
    info = Identity(None).info("default", modern=True)
    assert (info.uid, info.pid, info.exe, info.era) == (None, None, None, "modern")


@pytest.mark.parametrize("pid", [0, -1])
def test_a_process_of_another_pid_namespace_is_not_looked_up(
    pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def looked_up(pid: int) -> str:
        raise AssertionError(f"/proc/{pid} read")

    monkeypatch.setattr(identity, "exe_of", looked_up)
    info = Identity(Peer(pid=pid, uid=1000, gid=1000, unverified=True)).info("p", True)
    assert (info.uid, info.pid, info.exe) == (1000, None, None)


def test_the_program_is_read_once_and_the_profile_and_era_follow_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def exe_of(pid: int) -> str:
        reads.append(pid)
        return "agent"

    monkeypatch.setattr(identity, "exe_of", exe_of)
    who = Identity(Peer(pid=4242, uid=1, gid=1))
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
    who = Identity(None)
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
    mine = Identity(me()).whose()
    assert (mine.uid, mine.pid, mine.own) == (os.getuid(), os.getpid(), True)
    server = Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), server="notes")
    assert not Identity(server).whose().own
    other = Identity(Peer(pid=0, uid=os.getuid() + 1, gid=0, unverified=True)).whose()
    assert (other.uid, other.pid, other.own) == (os.getuid() + 1, None, False)
    held = Identity(None, identity.Holder(uid=os.getuid() + 1, pid=7)).whose()
    assert (held.uid, held.pid, held.own) == (os.getuid() + 1, 7, False)
    assert Identity(None).whose().agent == "endpoint"


def test_each_connection_has_an_id_of_its_own() -> None:
    ids = {Identity(None).connection for _ in range(200)}
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
            assert daemon.api.endpoint is not None
            port = str(daemon.api.endpoint.port)
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
            records = [r for r in Reading(str(tmp_path / "state")) if r.name == "nope"]
    assert records, "no record of the call"
    agent = records[0].agent
    assert (agent.uid, agent.pid) == (os.getuid(), child.pid)
    assert agent.exe == os.path.basename(os.path.realpath(sys.executable))
