"""A loopback TCP connection whose other end another process holds, for the tests of
who holds a connection."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

# Connects to argv[1]:argv[2], says so, and holds the connection until stdin closes.
HOLD = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("connected", flush=True)
sys.stdin.read()
"""


@asynccontextmanager
async def held_by_a_child(
    host: str = "127.0.0.1",
) -> AsyncIterator[tuple[trio.socket.SocketType, trio.Process]]:
    """mcpd's end of a connection to ``host`` from a child in a session of its own, and
    the child, until the block ends."""
    family = trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET
    with trio.fail_after(10), trio.socket.socket(family) as listener:
        await listener.bind((host, 0))
        listener.listen()
        port = listener.getsockname()[1]
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", HOLD, host, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            said = b""
            while not said.endswith(b"\n"):
                chunk = await proc.stdout.receive_some()
                assert chunk, "the client ended before it connected"
                said += chunk
            conn, _ = await listener.accept()
            with conn:
                yield conn, proc
        finally:
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await proc.wait()
