"""An agent socket's reader: the lines it hands on, and where it stops."""

from __future__ import annotations

import sys

import trio

from mcpd.agents.connection.line_reader import LineReader, apart_from_line
from mcpd.agents.entry.unfinished import UnfinishedLines
from mcpd.config.tables.model import DaemonConfig
from mcpd.daemon import _LINES
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import Oversized
from protocol.lines.oneline import line_fault


async def _read(sent: list[bytes], max_line: int) -> tuple[list[bytes], Oversized | None]:
    a, b = trio.socket.socketpair()
    ours, theirs = trio.SocketStream(a), trio.SocketStream(b)
    out = _LINES.writer(ours, a.fileno(), 1 << 20, line_fault)
    got: list[bytes] = []
    hold = UnfinishedLines(DaemonConfig).hold(None)
    reader = LineReader(_LINES, ours, max_line, out, lambda line, nursery: got.append(line), hold)
    with trio.fail_after(5):
        for chunk in sent:
            await theirs.send_all(chunk)
        await theirs.aclose()
        async with trio.open_nursery() as nursery:
            ended = await reader.run(nursery)
    await ours.aclose()
    return got, ended


async def test_each_line_is_handed_on_in_order_until_the_agent_hangs_up() -> None:
    got, ended = await _read([b'{"a":1}\n{"b"', b':2}\n{"c":3}\n'], 64)
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert ended is None


async def test_a_line_over_the_limit_ends_the_reading_and_nothing_after_it_is_handed_on() -> None:
    got, ended = await _read([b'{"a":1}\n{"b":"' + b"x" * 100 + b'"}\n{"c":3}\n'], 64)
    assert got == [b'{"a":1}']
    assert isinstance(ended, Oversized)
    assert ended.limit == 64


def test_a_request_keeps_its_params_and_lets_the_rest_of_its_line_go() -> None:
    """A request padded with a key mcpd never reads keeps only its params once set
    apart: its line can go, and what its task keeps is what is weighed."""
    text = b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"},"junk":"'
    line = text + b"x" * (1 << 20) + b'"}'
    request = envelope.decode_message(line)
    assert isinstance(request, rpc.Request)
    held = sys.getrefcount(line)  # its params, a view into the line, among them
    apart_from_line(request)
    assert sys.getrefcount(line) == held - 1
    assert bytes(request.params or b"") == b'{"name":"p"}'
