"""What a daemon run as a process of its own writes on stderr, read as it comes."""

from __future__ import annotations

import trio


class Said:
    """What the daemon writes on stderr, read as it comes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.text = ""
        self.changed = trio.Event()

    async def read(self) -> None:
        while chunk := await self.stream.receive_some(65536):
            self.text += chunk.decode(errors="replace")
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, text: str) -> None:
        while text not in self.text:
            await self.changed.wait()
