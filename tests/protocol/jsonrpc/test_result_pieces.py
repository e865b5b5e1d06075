"""A long result written in pieces is exactly the result written whole, each piece
checked as a line is."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import BrokenPiece, encode_result_pieces
from protocol.lines.oneline import line_fault
from protocol.mcp import core as mcp


def joined(pieces: Any) -> bytes:
    return b"".join(bytes(p) for p in pieces)


@pytest.mark.parametrize("rid", [1, 0, 2**62, "x", 'a","result":{"tools":[]'])
@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 17])
def test_the_pieces_make_exactly_the_reply_made_whole(rid: Any, count: int) -> None:
    tools = [{"name": f"t{i}", "description": 'é \u2028 "q"', "n": i} for i in range(count)]
    result = mcp.ListToolsResult(
        tools=tools, nextCursor="c", ttlMs=0, meta={"mcpd/servers": [{"server": "a"}]}
    )
    pieces = list(encode_result_pieces(rid, result, "tools", 4))
    assert joined(pieces) == rpc.encode_result(rid, result)
    assert line_fault(joined(pieces)) is None
    # One piece per four tools, besides the envelope's head and tail and the commas.
    assert len([p for p in pieces if p != b","]) == 2 + (count + 3) // 4


def test_a_list_that_is_not_the_first_field_is_sent_in_one_piece() -> None:
    class Later(msgspec.Struct):
        first: int
        items: list[int]

    result = Later(1, list(range(10)))
    pieces = list(encode_result_pieces(7, result, "items", 3))
    assert joined(pieces) == rpc.encode_result(7, result)
    assert len(pieces) == 1
    # Checked all the same.
    broken = Later(1, [msgspec.Raw(b"[1,")])  # type: ignore[list-item]
    with pytest.raises(BrokenPiece, match="not valid JSON"):
        list(encode_result_pieces(7, broken, "items", 3))


def test_a_piece_that_is_not_json_stops_the_reply() -> None:
    result = mcp.ListToolsResult(tools=[{"name": "ok"}, msgspec.Raw(b'{"name": broken')])
    pieces = encode_result_pieces(1, result, "tools", 1)
    assert bytes(next(pieces)).startswith(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[')
    assert bytes(next(pieces)) == b'{"name":"ok"}'
    with pytest.raises(BrokenPiece, match="not valid JSON"):
        list(pieces)


@pytest.mark.parametrize("size", [10, 5_000, 60_000, 400_000])
@pytest.mark.parametrize("small_first", [0, 10, 300])
def test_a_piece_is_at_most_its_size_and_one_item_whatever_the_items_weigh(
    size: int, small_first: int
) -> None:
    # A run of small tools first: what they weigh says nothing of the ones after them.
    tools = [{"name": f"s{i}"} for i in range(small_first)]
    tools += [{"name": f"t{i}", "description": "d" * (size + i % 7)} for i in range(40)]
    result = mcp.ListToolsResult(tools=tools)
    budget = 100_000
    pieces = list(encode_result_pieces(3, result, "tools", 16, budget))
    assert joined(pieces) == rpc.encode_result(3, result)
    arrays = [bytes(p) for p in pieces[1:-1] if p != b","]
    for array in arrays:
        assert len(array) < budget + size + 50
    if size >= budget:  # one large tool a piece
        assert len([a for a in arrays if b'"t' in a]) == 40
    if size == 10:  # small tools: the count bounds pieces
        assert len(arrays) == (small_first + 40 + 15) // 16
