"""A bare line splicer: the floor for a Python process that routes each tools/call.

It listens on a Unix socket and starts the server command for each connection with
``bench/relay.py``'s code, but it reads lines. A ``tools/call`` for a known local name is
decoded as far as routing needs (id, name, the arguments kept as raw bytes) and written
to the server under an id of its own, with the server's tool name and a fixed ``_meta``;
the server's result goes back under the agent's id. Every other line passes unchanged.

That is all: no check of the lines it writes, no time limit, breaker, progress, profile
or budget. ``--gate N`` holds calls beyond N at the server in a queue, as mcpd's
``max_concurrency`` does (4 for a stdio server by default). It is not a proxy anyone
should use; it measures what the routing alone costs in Python with trio and msgspec,
so the bench can show how much of mcpd's path is that and how much is the rest of its
job.

    python -m bench.splicer --socket /tmp/s.sock --tool mcp__echo__echo=echo -- CMD...
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

import msgspec
import trio

from bench.relay import CHUNK, listen, pass_eof, relay_to_process

META = (
    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{}}'
)


class _Params(msgspec.Struct):
    name: str
    arguments: msgspec.Raw = msgspec.Raw(b"{}")


class _Call(msgspec.Struct):
    id: int | str
    method: str
    params: _Params | None = None


class _Answer(msgspec.Struct):
    id: int | str | None = None
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty: absent
    error: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


_REQUEST = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":%s,'
    b'"_meta":' + META + b"}}"
)
_calls = msgspec.json.Decoder(_Call)
_answers = msgspec.json.Decoder(_Answer)


class Splice:
    """One agent connection and its server: the ids in flight, both ways, and (with a
    gate) the calls waiting for one of the server's ``gate`` slots, in arrival order."""

    def __init__(self, names: dict[str, str], gate: int = 0) -> None:
        self.names = {local: msgspec.json.encode(own) for local, own in names.items()}
        self.pending: dict[int, bytes] = {}  # our id -> the agent's id, encoded
        self.ids = itertools.count(1)
        self.gate = gate
        self.waiting: collections.deque[bytes] = collections.deque()
        self.released: list[bytes] = []  # let through by answers, for the server
        self.server: trio.abc.SendStream | None = None
        self.writing = trio.Lock()  # both directions write to the server

    def upstream(self, line: bytes) -> bytes | None:
        if b'"tools/call"' in line:
            try:
                call = _calls.decode(line)
            except msgspec.DecodeError:
                return line
            params = call.params
            own = self.names.get(params.name) if params is not None else None
            if call.method == "tools/call" and params is not None and own is not None:
                rid = next(self.ids)
                out = _REQUEST % (rid, own, params.arguments)
                gated = self.gate and len(self.pending) - len(self.waiting) >= self.gate
                self.pending[rid] = msgspec.json.encode(call.id)
                if gated:
                    self.waiting.append(out)
                    return None  # sent when an answer frees a slot
                return out
        return line

    def downstream(self, line: bytes) -> bytes | None:
        try:
            answer = _answers.decode(line)
        except msgspec.DecodeError:
            return line
        agent_id = self.pending.pop(answer.id, None) if isinstance(answer.id, int) else None
        if agent_id is None:
            return line
        if self.waiting:
            self.released.append(self.waiting.popleft())
        if len(answer.result):
            return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (agent_id, answer.result)
        return b'{"jsonrpc":"2.0","id":%s,"error":%s}' % (agent_id, answer.error)

    async def up(self, source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
        self.server = sink
        await splice_lines(source, sink, self.upstream, self.writing)

    async def down(self, source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
        await splice_lines(source, sink, self.downstream, None, self.release)

    async def release(self) -> None:
        if self.released and self.server is not None:
            out = b"".join([line + b"\n" for line in self.released])
            self.released.clear()
            async with self.writing:
                await write(self.server, out)


async def write(sink: trio.abc.SendStream, data: bytes) -> None:
    """Written at once where the peer has room, as mcpd writes: trio's send_all would
    pass through its loop first, which mcpd does not pay either."""
    if isinstance(sink, trio.SocketStream):
        fd = sink.socket.fileno()
    else:
        assert isinstance(sink, trio.lowlevel.FdStream)
        fd = sink.fileno()
    try:
        done = os.write(fd, data)
    except BlockingIOError:
        done = 0
    if done < len(data):
        await sink.send_all(memoryview(data)[done:])


async def splice_lines(
    source: trio.abc.ReceiveStream,
    sink: trio.abc.SendStream,
    each: Callable[[bytes], bytes | None],
    lock: trio.Lock | None = None,
    after: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Cut what comes into lines, pass each through ``each`` (None: write nothing) and
    write what a chunk held at once, then run ``after``; at EOF pass the EOF on."""
    rest = b""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while chunk := bytes(await source.receive_some(CHUNK)):
            *lines, rest = (rest + chunk if rest else chunk).split(b"\n")
            out = b"".join([o + b"\n" for o in map(each, lines) if o is not None])
            if out and lock is None:
                await write(sink, out)
            elif out and lock is not None:
                async with lock:
                    await write(sink, out)
            if after is not None:
                await after()
    await pass_eof(sink)


async def serve(
    socket_path: str,
    command: Sequence[str],
    names: dict[str, str],
    gate: int,
    *,
    task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED,
) -> None:
    async def one(client: trio.SocketStream) -> None:
        splice = Splice(names, gate)
        async with client:
            await relay_to_process(client, command, up=splice.up, down=splice.down)

    await listen(socket_path, one, task_status=task_status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bare tools/call line splicer")
    parser.add_argument("--socket", required=True, help="Unix socket to listen on")
    parser.add_argument(
        "--tool", action="append", default=[], metavar="LOCAL=OWN",
        help="a local tool name and the server's own name for it",
    )  # fmt: skip
    parser.add_argument(
        "--gate", type=int, default=0, metavar="N",
        help="at most N calls at the server at once, as mcpd's max_concurrency (0: none)",
    )  # fmt: skip
    parser.add_argument("command", nargs="+", help="server command (after --)")
    args = parser.parse_args(argv)
    names = dict(item.split("=", 1) for item in args.tool)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, args.socket, args.command, names, args.gate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
