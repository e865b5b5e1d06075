"""The browser's end of the page's ``/page/events`` stream, over an in-memory
connection: the daemon's end is a ``Wire`` that has read the request, for the page to
answer."""

from __future__ import annotations

import json
from typing import cast

import h11
import trio
import trio.testing

from mcpd.agents.http.wire import Wire

KEEP_ALIVE = b": keep-alive"


class Stream:
    """What the browser gets: events and comments, each as it came."""

    def __init__(self, stream: trio.abc.Stream, client: h11.Connection) -> None:
        self.stream = stream
        self.client = client
        self.pending = b""

    async def next(self) -> bytes:
        """The next event or comment; EOFError once the stream has ended."""
        while b"\n\n" not in self.pending:
            event = self.client.next_event()
            if event is h11.NEED_DATA:
                self.client.receive_data(bytes(await self.stream.receive_some(1 << 16)))
            elif isinstance(event, h11.Data):
                self.pending += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                raise EOFError
        block, _, self.pending = self.pending.partition(b"\n\n")
        return block

    async def regions(self) -> dict[str, str]:
        """The next event's regions of the page, past any comment before it."""
        while (block := await self.next()).startswith(b":"):
            pass
        data: dict[str, str] = json.loads(block.split(b"data: ", 1)[1])
        return data


async def requested(target: str = "/page/events") -> tuple[Stream, Wire, h11.Request]:
    """A browser's request for ``target``, and the daemon's end once it has read it."""
    client_end, server_end = trio.testing.memory_stream_pair()
    client = h11.Connection(h11.CLIENT)
    sent = h11.Request(method="GET", target=target, headers=[("host", "127.0.0.1:8765")])
    await client_end.send_all((client.send(sent) or b"") + (client.send(h11.EndOfMessage()) or b""))
    wire = Wire(cast(trio.SocketStream, server_end))
    head = await wire.read_head()
    assert head is not None and await wire.read_body() is not None
    return Stream(client_end, client), wire, head
