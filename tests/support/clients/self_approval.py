"""An agent that tries to approve what is meant for a person, run as a program of its
own (``python self_approval.py MODE ...``), the way a model would with its shell tool.

Each mode makes the agent's side of a scene, then reads lines from stdin: each line is
the arguments of an ``mcpd`` command its "shell tool" runs (``--socket`` is added), or
with ``page`` first, of ``page/client.py`` (the status page driven as with curl), or
``codes N trade|keep`` (``asked_codes``: the page's codes asked for by the agent itself), or
``connect`` (it connects to the socket and speaks MCP there, as an agent, from then on), and
for each it prints one JSON line, ``{"rc": ..., "out": ...}``. Closing stdin ends it.

- ``socket SOCKET``: connects to the daemon's socket and speaks MCP on it.
- ``unconnected SOCKET``: connects only when the line ``connect`` says so.
- ``call SOCKET TOOL``: connects, calls ``TOOL``, and is gone: the process that
  connected exits and leaves the connection (and the shell) to its child, in the same
  session.
- ``asking SOCKET TOOL``: connects, calls ``TOOL``, and keeps the connection open
  while the shell runs.
- ``bridge SOCKET TOOL``: a host that runs ``mcpd bridge`` and calls ``TOOL`` through
  it; its shell tool is the bridge's sibling, and runs each command under ``setsid``;
  the line ``end-bridge`` makes the host kill its bridge and wait for it to exit, and
  ``client TOOL [DEPTH]`` makes it start, under ``setsid`` (and ``DEPTH`` shells, one
  started by the other), a client of its own on the socket (``asking``) that calls
  ``TOOL``, open until the host ends.

A command line that begins ``nested DEPTH`` runs its command below ``DEPTH`` shells,
one started by the other; ``bridges N`` makes the program start ``mcpd bridge`` ``N``
times, one after another, each saying hello and ending.
- ``endpoint PORT TOKEN TOOL SOCKET``: calls ``TOOL`` on the HTTP endpoint, waiting
  for its answer on the connection while the shell runs.
- ``listing PORT TOKEN SOCKET``: lists the tools on the HTTP endpoint, and keeps the
  connection open (as an HTTP client keeps one alive) while the shell runs.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

ROOT = Path(__file__).resolve().parents[3]
PAGE_CLIENT = str(Path(__file__).resolve().parents[1] / "page" / "client.py")
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


# A shell that starts itself ``$1`` times over, the innermost running the rest of its
# arguments; each waits for the one it started, so none is replaced by it.
NEST = (
    'n=$1; shift; if [ "$n" -gt 0 ]; then sh -c "$0" "$0" $((n - 1)) "$@"; s=$?; exit $s; fi; "$@"'
)


def nested(depth: int, argv: list[str]) -> list[str]:
    return ["sh", "-c", NEST, NEST, str(depth - 1), *argv] if depth else argv


def line(rid: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def initialize(rid: int) -> bytes:
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "a", "version": "1"},
    }
    return line(rid, "initialize", hello)


def shell(sock: str, setsid: bool = False, end: Callable[[], None] | None = None) -> None:
    """Run what stdin asks, as the agent's shell tool would (``end-bridge``: ``end``)."""
    held = []  # the connections ``connect`` made, open until stdin closes
    clients = []  # the clients ``client`` started, until stdin closes
    for asked in sys.stdin:
        words = asked.split()
        depth = 0
        if words[:1] == ["nested"]:
            depth, words = int(words[1]), words[2:]
        if words[:1] == ["bridges"]:
            bridge_runs(sock, int(words[1]))
            print(json.dumps({"rc": 0, "out": ""}), flush=True)
            continue
        if words == ["connect"]:
            held.append(connected(sock))
            print(json.dumps({"rc": 0, "out": ""}), flush=True)
            continue
        if words[:1] == ["client"]:
            clients.append(client_apart(sock, words[1], int(words[2]) if words[2:] else 0))
            print(json.dumps({"rc": 0, "out": ""}), flush=True)
            continue
        if words == ["end-bridge"] and end is not None:
            end()
            print(json.dumps({"rc": 0, "out": ""}), flush=True)
            continue
        if words[:1] == ["codes"]:
            said = asked_codes(sock, int(words[1]), words[2] == "trade")
            print(json.dumps({"rc": 0, "out": said}), flush=True)
            continue
        if words[:1] == ["page"]:
            argv = [sys.executable, PAGE_CLIENT, sock, *words[1:]]
        else:
            argv = [sys.executable, "-m", "mcpd", *words, "--socket", sock]
        argv = nested(depth, argv)
        done = subprocess.run(
            ["setsid", *argv] if setsid else argv,
            capture_output=True,
            text=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        print(json.dumps({"rc": done.returncode, "out": done.stdout + done.stderr}), flush=True)
    for client in clients:
        assert client.stdin is not None
        client.stdin.close()
        client.wait()


def client_apart(sock: str, tool: str, depth: int = 0) -> subprocess.Popen[bytes]:
    """A client on the socket that calls ``tool`` (``asking``), in a session of its own
    but still this process's descendant (``setsid``, and no fork; below ``depth``
    shells)."""
    return subprocess.Popen(
        ["setsid", *nested(depth, [sys.executable, __file__, "asking", sock, tool])],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )


def bridge_runs(sock: str, count: int) -> None:
    """``mcpd bridge`` started ``count`` times, one after another, as a host starts one
    a conversation: each says hello and ends once it is answered."""
    for _ in range(count):
        subprocess.run(
            [sys.executable, "-m", "mcpd", "bridge", "--socket", sock],
            input=initialize(1),
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
            check=True,
        )


def asked_codes(sock: str, count: int, trade: bool) -> str:
    """``count`` of the page's codes asked for on a connection of the agent's own, each
    traded for a session (``trade``) or kept: the last answer's status, and the cookie
    of each session opened, one a line."""
    status, cookies = 0, []
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
        answers = s.makefile("rb")
        for rid in range(count):
            s.sendall(line(rid, "mcpd/auth/dashboard", {"_meta": META}))
            said = json.loads(answers.readline())
            assert "result" in said, said
            url = urlsplit(said["result"]["url"])
            if not trade:
                continue
            conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
            conn.request("GET", f"/?{url.query}")
            answer = conn.getresponse()
            answer.read()
            status = answer.status
            cookies.append((answer.getheader("set-cookie") or "").split(";")[0])
            conn.close()
    return "\n".join([str(status), *cookies])


def connected(sock: str) -> socket.socket:
    """A connection to ``sock`` that has spoken MCP: the agent is connected on it."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(initialize(1))
    s.makefile("rb").readline()
    return s


def on_socket(sock: str) -> None:
    with connected(sock):
        shell(sock)


def asking(sock: str, tool: str) -> None:
    with connected(sock) as s:
        s.sendall(line(2, "tools/call", {"name": tool, "arguments": {"text": "mine"}}))
        shell(sock)


def call_and_leave(sock: str, tool: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(initialize(1))
    s.makefile("rb").readline()
    s.sendall(line(2, "tools/call", {"name": tool, "arguments": {"text": "mine"}}))
    if os.fork() != 0:
        os._exit(0)  # the process that connected and called is gone
    shell(sock)
    s.close()


def through_bridge(sock: str, tool: str) -> None:
    bridge = subprocess.Popen(
        [sys.executable, "-m", "mcpd", "bridge", "--socket", sock],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert bridge.stdin is not None and bridge.stdout is not None
    bridge.stdin.write(initialize(1))
    bridge.stdin.flush()
    bridge.stdout.readline()
    bridge.stdin.write(line(2, "tools/call", {"name": tool, "arguments": {"text": "mine"}}))
    bridge.stdin.flush()

    def end() -> None:
        bridge.kill()
        bridge.wait()

    try:
        shell(sock, setsid=True, end=end)
    finally:
        bridge.kill()
        bridge.wait()


def post(conn: http.client.HTTPConnection, token: str, method: str, params: Any) -> bytes:
    """A modern request on ``conn``, its answer read."""
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    conn.request("POST", "/mcp", json.dumps(message), headers)
    return conn.getresponse().read()


def on_endpoint(port: int, token: str, tool: str, sock: str) -> None:
    def call() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        with suppress(OSError):
            post(conn, token, "tools/call", {"name": tool, "arguments": {"text": "mine"}})

    threading.Thread(target=call, daemon=True).start()
    shell(sock)


def listing(port: int, token: str, sock: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    post(conn, token, "tools/list", {})
    shell(sock)
    conn.close()


def main(mode: str, *args: str) -> None:
    if mode == "socket":
        on_socket(args[0])
    elif mode == "unconnected":
        shell(args[0])
    elif mode == "call":
        call_and_leave(args[0], args[1])
    elif mode == "asking":
        asking(args[0], args[1])
    elif mode == "bridge":
        through_bridge(args[0], args[1])
    elif mode == "endpoint":
        on_endpoint(int(args[0]), args[1], args[2], args[3])
    elif mode == "listing":
        listing(int(args[0]), args[1], args[2])
    else:
        raise SystemExit(f"no mode {mode!r}")


class Agent:
    """The agent program as a test drives it, from outside its session."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    async def reaped(self) -> None:
        """Until the process started is gone and reaped (in ``call``, the one that
        connected: its pid then names nothing)."""
        await trio.to_thread.run_sync(self.proc.wait)

    async def runs(self, *argv: str) -> tuple[int, str]:
        """``mcpd ARGV`` (or ``page ARGS``: ``page/client.py``) run by the agent's shell
        tool: its exit status and output."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(argv) + "\n")
        self.proc.stdin.flush()
        said = json.loads(await trio.to_thread.run_sync(self.proc.stdout.readline))
        return said["rc"], said["out"]


@asynccontextmanager
async def agent(*argv: str, apart: bool = False) -> AsyncIterator[Agent]:
    """The agent program in ``MODE ARGS`` (see above), in a session of its own;
    ``apart``: started as a person's command is (``APART``), so that nothing started it
    (else the test is its host, and that of each other agent it starts)."""
    from tests.support.cli.apart import APART  # here: this file also runs as a script

    command = [sys.executable, __file__, *argv]
    async with program([*APART, *command] if apart else command) as started:
        yield started


@asynccontextmanager
async def program(argv: list[str]) -> AsyncIterator[Agent]:
    """An agent program (``argv``) that runs this module's shell, in a session of its
    own."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        yield Agent(proc)
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        # Whoever holds its output last (the child that stayed) has gone once it ends.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(proc.stdout.read)
            await trio.to_thread.run_sync(proc.wait)


if __name__ == "__main__":
    main(*sys.argv[1:])
