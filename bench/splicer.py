"""A bare line splicer: the floor for a Python process that routes each tools/call.

It listens on a Unix socket and starts the server command for each connection with
``bench/relay.py``'s code, but it reads lines. A ``tools/call`` for a known local name is
decoded as far as routing needs (id, name, the arguments kept as raw bytes) and written
to the server under an id of its own, with the server's tool name and a fixed ``_meta``;
the server's result goes back under the agent's id. Every other line passes unchanged.

That is all: no check of the lines it writes, no time limit, breaker, queue, progress,
profile or budget. It is not a proxy anyone should use; it measures what the routing
alone costs in Python with trio and msgspec, so the bench can show how much of mcpd's
path is that and how much is the rest of its job.

    python -m bench.splicer --socket /tmp/s.sock --tool mcp__echo__echo=echo -- CMD...
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import sys
from collections.abc import Callable, Sequence

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
    """One agent connection and its server: the ids in flight, both ways."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = {local: msgspec.json.encode(own) for local, own in names.items()}
        self.pending: dict[int, bytes] = {}  # our id -> the agent's id, encoded
        self.ids = itertools.count(1)

    def upstream(self, line: bytes) -> bytes:
        if b'"tools/call"' in line:
            try:
                call = _calls.decode(line)
            except msgspec.DecodeError:
                return line
            params = call.params
            own = self.names.get(params.name) if params is not None else None
            if call.method == "tools/call" and params is not None and own is not None:
                rid = next(self.ids)
                self.pending[rid] = msgspec.json.encode(call.id)
                return _REQUEST % (rid, own, params.arguments)
        return line

    def downstream(self, line: bytes) -> bytes:
        try:
            answer = _answers.decode(line)
        except msgspec.DecodeError:
            return line
        agent_id = self.pending.pop(answer.id, None) if isinstance(answer.id, int) else None
        if agent_id is None:
            return line
        if len(answer.result):
            return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (agent_id, answer.result)
        return b'{"jsonrpc":"2.0","id":%s,"error":%s}' % (agent_id, answer.error)


async def splice_lines(
    source: trio.abc.ReceiveStream, sink: trio.abc.SendStream, each: Callable[[bytes], bytes]
) -> None:
    """Cut what comes into lines, pass each through ``each`` and write what a chunk held
    at once; at EOF pass the EOF on."""
    if isinstance(sink, trio.SocketStream):
        fd = sink.socket.fileno()
    else:
        assert isinstance(sink, trio.lowlevel.FdStream)
        fd = sink.fileno()
    rest = b""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while chunk := bytes(await source.receive_some(CHUNK)):
            *lines, rest = (rest + chunk if rest else chunk).split(b"\n")
            if not lines:
                continue
            out = b"".join([each(line) + b"\n" for line in lines])
            # Written at once where the peer has room, as mcpd writes: trio's send_all
            # would pass through its loop first, which mcpd does not pay either.
            try:
                done = os.write(fd, out)
            except BlockingIOError:
                done = 0
            if done < len(out):
                await sink.send_all(memoryview(out)[done:])
    await pass_eof(sink)


async def serve(socket_path: str, command: Sequence[str], names: dict[str, str]) -> None:
    async def one(client: trio.SocketStream) -> None:
        splice = Splice(names)
        async with client:
            await relay_to_process(
                client,
                command,
                up=functools.partial(splice_lines, each=splice.upstream),
                down=functools.partial(splice_lines, each=splice.downstream),
            )

    await listen(socket_path, one)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bare tools/call line splicer")
    parser.add_argument("--socket", required=True, help="Unix socket to listen on")
    parser.add_argument(
        "--tool", action="append", default=[], metavar="LOCAL=OWN",
        help="a local tool name and the server's own name for it",
    )  # fmt: skip
    parser.add_argument("command", nargs="+", help="server command (after --)")
    args = parser.parse_args(argv)
    names = dict(item.split("=", 1) for item in args.tool)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, args.socket, args.command, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
