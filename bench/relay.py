"""A bare trio relay: the floor for one extra Python hop between an agent and a server.

It listens on a Unix socket. For each connection it starts the server command (or connects
to another Unix socket) and copies bytes both ways without looking at them.

    python -m bench.relay --socket /tmp/r.sock -- python bench/echo_server.py
    python -m bench.relay --socket /tmp/r.sock --upstream /tmp/other.sock
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence

import trio

CHUNK = 64 * 1024

# Moves one direction's bytes until EOF: (source, sink).
Pump = Callable[[trio.abc.ReceiveStream, trio.abc.SendStream], Awaitable[None]]


async def pass_eof(sink: trio.abc.SendStream) -> None:
    """Close the write side if it has one, else the stream."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        if isinstance(sink, trio.SocketStream):
            await sink.send_eof()
        else:
            await sink.aclose()


async def pump(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
    """Copy until EOF, then pass the EOF on."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while chunk := await source.receive_some(CHUNK):
            await sink.send_all(chunk)
    await pass_eof(sink)


async def relay_to_process(
    client: trio.SocketStream, command: Sequence[str], up: Pump = pump, down: Pump = pump
) -> None:
    # A session of its own, as mcpd starts its servers: with autogroup scheduling that is
    # a scheduling group of its own, and on a shared machine the two must be treated alike.
    proc = await trio.lowlevel.open_process(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(up, client, proc.stdin)
            await down(proc.stdout, client)
            nursery.cancel_scope.cancel()
    finally:
        with trio.move_on_after(2, shield=True):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            with trio.move_on_after(2, shield=True):
                await proc.wait()


async def relay_to_socket(client: trio.SocketStream, path: str) -> None:
    upstream = await trio.open_unix_socket(path)
    async with upstream, trio.open_nursery() as nursery:
        nursery.start_soon(pump, client, upstream)
        await pump(upstream, client)
        nursery.cancel_scope.cancel()


async def listen(
    socket_path: str,
    handle: Callable[[trio.SocketStream], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handle`` for each connection on a Unix socket at ``socket_path``."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(socket_path)
    sock.listen(1024)
    try:
        await trio.serve_listeners(handle, [trio.SocketListener(sock)], task_status=task_status)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)


async def serve(socket_path: str, command: Sequence[str], upstream: str | None) -> None:
    async def handle(client: trio.SocketStream) -> None:
        async with client:
            try:
                if upstream is not None:
                    await relay_to_socket(client, upstream)
                else:
                    await relay_to_process(client, command)
            except OSError as exc:
                print(f"relay: connection failed: {exc}", file=sys.stderr)

    await listen(socket_path, handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bare byte relay on a Unix socket")
    parser.add_argument("--socket", required=True, help="Unix socket to listen on")
    parser.add_argument("--upstream", help="Unix socket to connect to instead of spawning")
    parser.add_argument("command", nargs="*", help="server command (after --)")
    args = parser.parse_args(argv)
    if not args.command and not args.upstream:
        parser.error("give a server command after -- or --upstream")
    # On SIGTERM the relay just dies: each child sees EOF on its stdin and exits by itself.
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, args.socket, args.command, args.upstream)
    return 0


if __name__ == "__main__":
    sys.exit(main())
