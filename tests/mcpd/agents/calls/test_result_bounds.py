"""The bounds a server's error, a result's ``_meta`` (its own and its content blocks')
and a progress report's ``_meta`` are held to, on their own: what is within them is
passed on as the same object, what is past them cut or left out."""

from __future__ import annotations

import msgspec
from msgspec import Raw

from mcpd.agents.calls.result_bounds import (
    DATA_BYTES,
    META_BYTES,
    META_LEFT_OUT,
    blocks_within,
    error_object_within,
    error_within,
    meta_within,
    progress_within,
)
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

_head = msgspec.json.Decoder(mcp.CallToolResultHead)


def _result(meta_bytes: int) -> Raw:
    meta = {"k": "v" * meta_bytes}
    return Raw(msgspec.json.encode({"content": [], "_meta": meta, "structuredContent": {"a": 1}}))


def test_an_error_within_its_bounds_is_the_same_error() -> None:
    exc = rpc.RPCError(-32000, "short", Raw(b'{"d":1}'))
    assert error_within(exc, 100) is exc
    own = rpc.RPCError(-32000, "short", {"d": "x" * 10})
    assert error_within(own, 100) is own


def test_an_errors_data_of_mcpds_making_is_measured_as_written() -> None:
    exc = rpc.RPCError(-32000, "m", {"d": "x" * DATA_BYTES})
    bounded = error_within(exc, 100)
    assert isinstance(bounded.data, str) and f"{DATA_BYTES + 8} bytes" in bounded.data
    assert bounded.message == "m" and bounded.code == -32000


def test_an_errors_message_past_the_budget_is_cut_with_a_note() -> None:
    bounded = error_within(rpc.RPCError(-32000, "a" * 150), 100)
    assert bounded.message.startswith("a" * 100 + "\n[mcpd: 50 more characters were cut here")
    assert bounded.data is msgspec.UNSET


def test_a_meta_within_its_bound_leaves_the_result_as_it_came() -> None:
    raw = _result(META_BYTES - 100)
    head = _head.decode(raw)
    assert meta_within(raw, head, 8000) == (raw, head)


def test_a_meta_past_its_bound_is_left_out_and_the_rest_goes_on_as_written() -> None:
    raw = _result(META_BYTES)
    bounded, head = meta_within(raw, _head.decode(raw), 8000)
    got = msgspec.json.decode(bounded)
    note = got["_meta"][META_LEFT_OUT]
    assert note == {"bytes": META_BYTES + len(b'{"k":""}'), "bound": META_BYTES}
    assert got["structuredContent"] == {"a": 1} and got["content"] == []
    assert head.meta == Raw(msgspec.json.encode(got["_meta"]))


def test_a_budget_larger_than_the_bound_is_the_bound() -> None:
    raw = _result(META_BYTES)
    head = _head.decode(raw)
    assert meta_within(raw, head, 2 * META_BYTES) == (raw, head)


def test_an_error_object_within_its_bounds_or_not_one_is_the_same_object() -> None:
    within = {"code": -32000, "message": "short", "data": {"d": 1}}
    assert error_object_within(within, 100) is within
    for odd in ({"code": "x", "message": "m" * 500}, {"code": 1, "message": ["m"]}, {}):
        assert error_object_within(odd, 100) is odd


def test_an_error_objects_message_is_cut_and_its_data_left_out_past_their_bounds() -> None:
    error = {"code": -32000, "message": "m" * 500, "data": {"d": "x" * DATA_BYTES}, "x": 1}
    held = error_object_within(error, 100)
    message, data = held["message"], held["data"]
    assert isinstance(message, str) and message.startswith("m" * 100)
    assert "400 more characters were cut here" in message, message
    assert isinstance(data, str) and f"{DATA_BYTES + 8} bytes" in data, data
    assert held["code"] == -32000 and held["x"] == 1
    assert error_object_within({"code": 1, "message": "m" * 500}, 100).keys() == {
        "code",
        "message",
    }


def test_a_blocks_meta_or_annotations_past_their_bound_are_left_out_the_rest_as_written() -> None:
    big = {"k": "v" * META_BYTES}
    blocks = [
        {"type": "text", "text": "a", "_meta": big, "annotations": {"priority": 1}},
        {"type": "image", "data": "QQ==", "mimeType": "image/png", "annotations": big},
    ]
    raw = Raw(msgspec.json.encode({"content": blocks, "structuredContent": {"n": 1.50}}))
    held = msgspec.json.decode(blocks_within(raw, 100))
    note = {META_LEFT_OUT: {"bytes": len(msgspec.json.encode(big)), "bound": META_BYTES}}
    assert held["content"] == [
        {"type": "text", "text": "a", "_meta": note, "annotations": {"priority": 1}},
        {"type": "image", "data": "QQ==", "mimeType": "image/png", "annotations": note},
    ]
    assert held["structuredContent"] == {"n": 1.5}


def test_blocks_within_their_bound_or_content_that_is_not_blocks_leave_the_result() -> None:
    small = Raw(msgspec.json.encode({"content": [{"type": "text", "text": "x" * META_BYTES}]}))
    assert blocks_within(small, 100) is small
    odd = Raw(b'{"content": ' + b'"' + b"x" * META_BYTES + b'"}')
    assert blocks_within(odd, 100) is odd


def test_a_progress_reports_meta_past_its_bound_is_left_out() -> None:
    within = mcp.ProgressParams("t", 1, meta={"k": "v"})
    assert progress_within(within) is within
    bare = mcp.ProgressParams("t", 1)
    assert progress_within(bare) is bare
    big = {"k": "v" * META_BYTES}
    held = progress_within(mcp.ProgressParams("t", 2, message="m", meta=big))
    note = {META_LEFT_OUT: {"bytes": len(msgspec.json.encode(big)), "bound": META_BYTES}}
    assert held == mcp.ProgressParams("t", 2, message="m", meta=note)
