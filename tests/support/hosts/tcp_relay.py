"""A loopback TCP port relayed byte for byte to a Unix socket, for HTTP clients that
cannot speak to a Unix socket (the conformance suite, the SDK's HTTP client)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from functools import partial

import trio


async def _pump(src: trio.abc.ReceiveStream, dst: trio.abc.SendStream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await src.receive_some(65536):
            await dst.send_all(data)
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        if isinstance(dst, trio.SocketStream):
            await dst.send_eof()


@contextlib.asynccontextmanager
async def tcp_relay(unix_path: str) -> AsyncIterator[int]:
    """The port of a 127.0.0.1 listener; each connection gets its own Unix one."""

    async def handle(client: trio.SocketStream) -> None:
        async with client:
            try:
                upstream = await trio.open_unix_socket(unix_path)
            except OSError:
                return
            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(_pump, client, upstream)
                await _pump(upstream, client)
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()
