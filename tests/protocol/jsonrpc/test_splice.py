"""The tools/call splice: what it decodes, and that the lines it builds need no check.

A spliced line is written without the check every other line gets (parsing it once
more), so these properties are what that rests on: for any call the splice decoder
takes and any result a transport decodes, the line built around their bytes is one
line of JSON, equal as JSON to what encoding the same message would give.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.jsonrpc import envelope, splice
from protocol.jsonrpc import messages as rpc
from protocol.lines.oneline import line_fault
from protocol.mcp import core as mcp

# JSON values as servers and agents write them: unicode, escapes, big and odd numbers.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(st.text(), values, max_size=5)
ids = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=rpc.MAX_ID_LENGTH)
names = st.text(min_size=1, max_size=40)


def line(message: dict[str, Any], ascii_only: bool = True) -> bytes:
    return json.dumps(message, ensure_ascii=ascii_only).encode()


envelopes = st.sampled_from(
    [None, {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, {"a": [1, "é"]}]
)


@settings(max_examples=300)
@given(ids, names, objects, envelopes, st.none() | st.text(), st.integers(1, 2**31))
def test_a_spliced_request_is_the_encoded_request(
    rid: Any,
    name: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None,
    token: str | None,
    up_id: int,
) -> None:
    params: dict[str, Any] = {"name": "mcp__s__tool", "arguments": arguments}
    call = splice.decode_call(
        line({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    )
    assert call is not None and call.id == rid
    encoded_meta = None if meta is None else msgspec.json.encode(meta)
    shape = splice.CallShape(name, encoded_meta)
    spliced = shape.request(up_id, call.params.arguments, token)
    assert line_fault(spliced) is None
    whole = dict(meta or {}) if token is None else {**(meta or {}), "progressToken": token}
    expected = mcp.CallToolParams(
        name,
        call.params.arguments,
        meta=whole if meta is not None or token is not None else msgspec.UNSET,
    )
    assert json.loads(spliced) == json.loads(rpc.encode_request(up_id, "tools/call", expected))


@settings(max_examples=300)
@given(ids, objects)
def test_a_spliced_reply_is_the_encoded_reply(agent_id: Any, result: dict[str, Any]) -> None:
    # As a server would write it, then decoded the transports' way.
    answer = envelope.decode_response(line({"jsonrpc": "2.0", "id": 9, "result": result}))
    assert answer is not None
    spliced = splice.reply(agent_id, answer.result)
    assert line_fault(spliced) is None
    assert json.loads(spliced) == json.loads(rpc.encode_result(agent_id, answer.result))
    assert json.loads(spliced)["result"] == result


def test_only_an_ordinary_tools_call_in_ascii_is_taken() -> None:
    ordinary = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    assert splice.decode_call(line(ordinary)) is not None
    with_meta = {**ordinary, "params": {"name": "t", "arguments": {}, "_meta": {"k": 1}}}
    taken = splice.decode_call(line(with_meta))
    assert taken is not None and bytes(taken.params.meta) == b'{"k": 1}'
    refused = [
        # Text that is not ASCII is checked by the general decoder, not kept raw here.
        line({**ordinary, "params": {"name": "t", "arguments": {"x": "é"}}}, ascii_only=False),
        line(ordinary) + b"\r",
        # Members routing does not look at: an input retry, a task request.
        line({**ordinary, "params": {"name": "t", "requestState": "s"}}),
        line({**ordinary, "params": {"name": "t", "task": {"ttl": 5}}}),
        line({**ordinary, "method": "tools/list"}),
        line({**ordinary, "jsonrpc": "1.0"}),
        line({**ordinary, "id": None}),
        line({**ordinary, "id": 1.5}),
        line({**ordinary, "params": {"arguments": {}}}),
        line({**ordinary, "params": ["t"]}),
        # An id too long to keep: the general decoder refuses it, saying why.
        line({**ordinary, "id": "i" * (rpc.MAX_ID_LENGTH + 1)}),
        # An integer past 64 signed bits: the general decoder takes or refuses it.
        line({**ordinary, "id": 2**63}),
        line({**ordinary, "id": -(2**63) - 1}),
        line({**ordinary, "id": 10**4000}),
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{,}}}',
    ]
    for text in refused:
        assert splice.decode_call(text) is None, text


def test_a_request_without_arguments_has_none() -> None:
    shape = splice.CallShape("echo", None)
    assert json.loads(shape.request(3, msgspec.UNSET)) == {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "echo"},
    }
    with_token = json.loads(shape.request(4, msgspec.UNSET, "mcpd-echo-1"))
    assert with_token["params"] == {"name": "echo", "_meta": {"progressToken": "mcpd-echo-1"}}


def test_a_call_holding_a_number_no_decoder_reads_is_left_to_the_general_decoder() -> None:
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":'
    for number in (b"9" * 4301, b"1e309"):
        assert splice.decode_call(head + b'{"n":' + number + b"}}}") is None
        assert splice.decode_call(head + b'{"n":"' + number + b'"}}}') is not None
