"""Agents that reach mcpd through something between them and it, or leave something
behind, run as programs of their own (``python hosted.py MODE ...``) for
``self_approval``'s shell: each line of stdin is an ``mcpd`` command the agent's
"shell tool" runs, answered by one JSON line.

- ``relayed SOCKET TOOL``: a host that reaches the socket through a plain relay of
  lines (``relay``, as socat would), calls ``TOOL`` through it, and runs its shell tool
  under ``setsid``.
- ``launched SOCKET TOOL``: a host that starts ``mcpd bridge`` through a launcher that
  forks, in a session of its own (``setsid sh -c '...; true'``), calls ``TOOL``
  through it, and runs its shell tool under ``setsid``.
- ``http-relayed PORT TOKEN SOCKET TOOL``: a host that reaches the HTTP endpoint
  through a relay of its own (``http-relay``), calls ``TOOL``, and runs its shell tool
  under ``setsid``.
- ``closed PORT TOKEN SOCKET``: lists the tools on the HTTP endpoint, closes its
  connection, and runs its shell (as itself).
- ``left SOCKET``: connects to the socket and exits, leaving a child in its session
  (not holding the connection) that runs the shell.
- ``left-leading SOCKET``: as ``left``, but it first begins a session of its own (as
  ``setsid AGENT`` starts one), and its child runs the shell under ``setsid``.
- ``relay SOCKET``, ``http-relay PORT TOKEN``: the relays, lines on stdin and stdout.
"""

from __future__ import annotations

import http.client
import os
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.support.cli.apart import APART
from tests.support.clients.self_approval import (
    ROOT,
    Agent,
    connected,
    initialize,
    line,
    program,
    shell,
)

LEGACY = "2025-06-18"


def relay(sock: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)

    def up() -> None:
        for sent in sys.stdin.buffer:
            s.sendall(sent)
        s.shutdown(socket.SHUT_WR)

    threading.Thread(target=up, daemon=True).start()
    while said := s.recv(65536):
        sys.stdout.buffer.write(said)
        sys.stdout.buffer.flush()


def http_relay(port: int, token: str) -> None:
    """Each line on stdin posted to /mcp on one kept-alive connection, in the session
    its ``initialize`` opens; each answer's messages written out, one a line."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    session: str | None = None
    for sent in sys.stdin.buffer:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY,
        }
        if session is not None:
            headers["Mcp-Session-Id"] = session
        conn.request("POST", "/mcp", sent, headers)
        answer = conn.getresponse()
        body = answer.read().decode()
        session = answer.getheader("Mcp-Session-Id") or session
        if answer.getheader("Content-Type", "").startswith("text/event-stream"):
            said = [d[5:].strip() for d in body.splitlines() if d.startswith("data:")]
        else:
            said = [body.strip()] if body.strip() else []
        for message in said:
            sys.stdout.write(message + "\n")
        sys.stdout.flush()


def host(sock: str, tool: str, argv: list[str]) -> None:
    """Starts ``argv`` as its way to mcpd, calls ``tool`` through it, and runs its
    shell tool under ``setsid`` until stdin closes."""
    relayed = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert relayed.stdin is not None and relayed.stdout is not None
    relayed.stdin.write(initialize(1))
    relayed.stdin.flush()
    relayed.stdout.readline()
    relayed.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    relayed.stdin.write(line(2, "tools/call", {"name": tool, "arguments": {"text": "mine"}}))
    relayed.stdin.flush()
    try:
        shell(sock, setsid=True)
    finally:
        relayed.kill()
        relayed.wait()


def closed(port: int, token: str, sock: str) -> None:
    """Opens a session on the endpoint, lists its tools, closes the connection, and
    runs the shell as itself."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY,
    }
    conn.request("POST", "/mcp", initialize(1), headers)
    answer = conn.getresponse()
    answer.read()
    headers["Mcp-Session-Id"] = answer.getheader("Mcp-Session-Id") or ""
    conn.request("POST", "/mcp", line(2, "tools/list"), headers)
    conn.getresponse().read()
    conn.close()
    shell(sock)


def left(sock: str, leading: bool = False) -> None:
    """Connects, then exits; its child, in its session, runs the shell once it is gone
    (its end of ``gone`` closes with it). ``leading``: it leads that session, and the
    child runs each command in a session of its own."""
    if leading:
        os.setsid()
    s = connected(sock)
    gone_r, gone_w = os.pipe()
    if os.fork() != 0:
        os._exit(0)
    s.close()
    os.close(gone_w)
    os.read(gone_r, 1)
    shell(sock, setsid=leading)


@asynccontextmanager
async def scene(*argv: str, apart: bool = False) -> AsyncIterator[Agent]:
    """The program in ``MODE ARGS`` (see above), as ``self_approval.agent`` starts its
    own."""
    command = [sys.executable, "-m", "tests.support.clients.hosted", *argv]
    async with program([*APART, *command] if apart else command) as started:
        yield started


def main(mode: str, *args: str) -> None:
    me = [sys.executable, "-m", "tests.support.clients.hosted"]
    if mode == "relay":
        relay(args[0])
    elif mode == "http-relay":
        http_relay(int(args[0]), args[1])
    elif mode == "relayed":
        host(args[0], args[1], [*me, "relay", args[0]])
    elif mode == "launched":
        bridge = shlex.join([sys.executable, "-m", "mcpd", "bridge", "--socket", args[0]])
        host(args[0], args[1], ["setsid", "sh", "-c", f"{bridge}; true"])
    elif mode == "http-relayed":
        host(args[2], args[3], [*me, "http-relay", args[0], args[1]])
    elif mode == "closed":
        closed(int(args[0]), args[1], args[2])
    elif mode == "left":
        left(args[0])
    elif mode == "left-leading":
        left(args[0], leading=True)
    else:
        raise SystemExit(f"no mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
