"""A shared server's log messages, in a running daemon that lets another local user's
agents in: what the server logged while serving one user's call (here, as often, that
call's arguments) never reaches another user's agent, and another user's
``logging/setLevel``, answered as ever, does not make the server more verbose."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.log_messages import LOGGING, SECRET, log_message
from tests.support.system.peer_user import (
    needs_root,
    peer_uid,
    shared_dir,
    socket_open_to,
    start_as,
)

LIMIT = 60

# The other user's agent, in the handshake protocol: asks for every log message
# (``debug``) and prints the answer; then, once told on stdin, sends a ping and prints
# everything that reached it before the ping's answer, as one JSON list.
OTHER_AGENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")

def ask(rid, method, params):
    req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    f.write(json.dumps(req).encode() + bytes([10]))
    f.flush()
    heard = []
    for line in f:
        msg = json.loads(line)
        if "method" not in msg and msg.get("id") == rid:
            return heard, msg
        heard.append(msg)
    return heard, None

hello = {"protocolVersion": "2025-11-25", "capabilities": {},
         "clientInfo": {"name": "other-user", "version": "0"}}
ask(1, "initialize", hello)
f.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
f.write(bytes([10]))
f.flush()
print(json.dumps(ask(2, "logging/setLevel", {"level": "debug"})[1]), flush=True)
sys.stdin.readline()
print(json.dumps(ask(3, "ping", {})[0]), flush=True)
"""


class Lines:
    """A process's stdout, a line at a time."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = b""

    async def next(self) -> Any:
        while b"\n" not in self._buf:
            chunk = await self._stream.receive_some()
            assert chunk, f"the other user's agent ended early: {self._buf!r}"
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)


@needs_root
async def test_another_users_agent_hears_nothing_a_shared_server_logged(
    tmp_path: Path,
) -> None:
    uid = peer_uid()
    shared = shared_dir()
    cfg = make_config(
        tmp_path,
        {"notes": {"command": sys.executable, "args": [LOGGING]}},
        **socket_open_to(uid, shared),
        state_dir=str(tmp_path / "state"),
    )
    try:
        with trio.fail_after(LIMIT):
            async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as owner:
                await owner.initialize()
                await owner.result("logging/setLevel", {"level": "notice"})
                _, seen = await log_message(owner, 0, "level set to notice")
                other = await start_as(uid, OTHER_AGENT, daemon.socket_path, stdin=True)
                try:
                    assert other.stdin is not None and other.stdout is not None
                    lines = Lines(other.stdout)
                    answer = await lines.next()
                    assert answer["result"] == {}, answer  # its clients must not break
                    # The owner's next level is the one the server is asked for next:
                    # the other user's debug is not among what agents want of it.
                    await owner.result("logging/setLevel", {"level": "info"})
                    asked, seen = await log_message(owner, seen, "level set to")
                    reply = await owner.call("mcp__notes__note", {"token": SECRET})
                    assert reply["content"][0]["text"] == "noted", reply
                    await log_message(owner, seen, SECRET)  # the owner hears its server
                    await other.stdin.send_all(b"go\n")
                    heard = await lines.next()
                finally:
                    other.kill()
                    await other.wait()
        assert SECRET not in json.dumps(heard), f"another user's agent heard the call: {heard}"
        assert heard == [], f"another user's agent heard the server: {heard}"
        assert asked["data"] == "level set to info", asked
    finally:
        shutil.rmtree(shared)
