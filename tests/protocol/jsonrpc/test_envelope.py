from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


def test_request_notification_and_responses_are_classified() -> None:
    req = envelope.decode_message(
        b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"a":1}}'
    )
    assert isinstance(req, rpc.Request) and req.id == 7 and req.method == "tools/list"
    assert json.loads(bytes(req.params)) == {"a": 1}  # type: ignore[arg-type]
    note = envelope.decode_message(b'{"jsonrpc":"2.0","method":"notifications/progress"}')
    assert isinstance(note, rpc.Notification) and note.params is None
    ok = envelope.decode_message(b'{"result":{"x":[1,2]},"jsonrpc":"2.0","id":"a"}')
    assert isinstance(ok, rpc.Response) and ok.id == "a" and bytes(ok.result) == b'{"x":[1,2]}'
    err = envelope.decode_message(
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}'
    )
    assert isinstance(err, rpc.ErrorResponse) and err.id is None and err.error.code == -32600


def test_a_batch_is_refused_in_words_that_say_so() -> None:
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(b' [{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert info.value.code == rpc.INVALID_REQUEST
    assert (
        "a JSON-RPC batch" in info.value.message and "each message on its own" in info.value.message
    )


@pytest.mark.parametrize("line", [b"[INFO] server log line", b"[", b"[1, 2"])
def test_text_that_only_starts_like_a_batch_is_not_json(line: bytes) -> None:
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(line)
    assert info.value.code == rpc.PARSE_ERROR and info.value.unreadable == "not JSON"
    assert "batch" not in info.value.message


def test_parse_error_has_null_id() -> None:
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(b'{"jsonrpc":"2.0","id":1,')
    assert info.value.code == rpc.PARSE_ERROR
    reply = json.loads(info.value.reply())
    assert reply["id"] is None and reply["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("line", "reply_id"),
    [
        (b'[{"jsonrpc":"2.0","id":1,"method":"x"}]', None),  # batches are not MCP
        (b'{"jsonrpc":"1.0","id":4,"method":"x"}', 4),
        (b'{"jsonrpc":"2.0","id":5,"method":42}', 5),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":9}', 9),
        (b'"just a string"', None),
    ],
)
def test_invalid_requests_keep_a_valid_id(line: bytes, reply_id: object) -> None:
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(line)
    assert info.value.code == rpc.INVALID_REQUEST
    assert json.loads(info.value.reply())["id"] == reply_id


def test_bad_params_keep_the_id_for_the_error_reply() -> None:
    req = envelope.decode_message(
        b'{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":5}}'
    )
    assert isinstance(req, rpc.Request)
    with pytest.raises(rpc.InvalidParams, match="name"):
        rpc.decode_as(req.params, mcp.CallToolParams)
    assert req.id == "r1"


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    deep = (
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    )
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(deep)
    assert info.value.code == rpc.PARSE_ERROR


def test_error_without_an_id_member_is_an_error_response() -> None:
    msg = envelope.decode_message(
        b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"no session"}}'
    )
    assert isinstance(msg, rpc.ErrorResponse) and msg.id is None
    assert msg.error.message == "no session"


@pytest.mark.parametrize(
    ("line", "given", "why"),
    [
        (b'{"jsonrpc":"2.0","id":9,"result":{},"error":{"code":-1,"message":"m"}}', 9, "both"),
        (b'{"jsonrpc":"2.0","error":{"code":-1,"message":"m"},"result":1}', None, "both"),
        (b'{"jsonrpc":"2.0","id":24.0,"result":{}}', 24.0, "bad id"),
        (b'{"jsonrpc":"2.0","id":true,"error":{"code":-1,"message":"m"}}', True, "bad id"),
    ],
)
def test_a_response_that_cannot_be_taken_keeps_the_id_it_came_under(
    line: bytes, given: object, why: str
) -> None:
    with pytest.raises(rpc.MalformedResponse) as info:
        envelope.decode_message(line)
    assert info.value.given == given and info.value.why.startswith(why)
    assert info.value.code == rpc.INVALID_REQUEST and info.value.id is None


def test_malformed_error_object_from_a_peer_is_still_an_error() -> None:
    msg = envelope.decode_message(b'{"jsonrpc":"2.0","id":3,"error":"boom"}')
    assert isinstance(msg, rpc.ErrorResponse) and msg.id == 3
    assert msg.error.code == rpc.INTERNAL_ERROR


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_as_other_exceptions(data: bytes) -> None:
    try:
        envelope.decode_message(data)
    except rpc.DecodeFailure as exc:
        assert exc.code in (rpc.PARSE_ERROR, rpc.INVALID_REQUEST)


@given(
    st.integers(-(2**63), 2**63 - 1) | st.text(max_size=50),
    st.text(min_size=1, max_size=30),
    json_values,
)
def test_any_valid_request_round_trips(rid: int | str, method: str, params: object) -> None:
    msg = envelope.decode_message(rpc.encode_request(rid, method, params))
    assert isinstance(msg, rpc.Request)
    assert (msg.id, msg.method) == (rid, method)
    if params is None:
        assert msg.params is None  # None means "no params": never sent as null
    else:
        assert msgspec.json.decode(bytes(msg.params)) == params  # type: ignore[arg-type]


def test_a_request_whose_id_is_too_long_is_refused_under_no_id() -> None:
    """Its id is neither kept nor echoed: the error names its length and the bound."""
    longest = "é" * rpc.MAX_ID_LENGTH
    msg = envelope.decode_message(rpc.encode_request(longest, "ping"))
    assert isinstance(msg, rpc.Request) and msg.id == longest
    for method in ("ping", 7):
        line = msgspec.json.encode({"jsonrpc": "2.0", "id": longest + "é", "method": method})
        with pytest.raises(rpc.DecodeFailure) as caught:
            envelope.decode_message(line)
        assert caught.value.id is None and caught.value.code == rpc.INVALID_REQUEST
        assert f"{rpc.MAX_ID_LENGTH + 1} characters" in caught.value.message
        assert f"over the {rpc.MAX_ID_LENGTH}" in caught.value.message
    # An answer is matched by its id, not kept by it: a long one is read as it came.
    answer = envelope.decode_message(rpc.encode_result(longest + "é", {}))
    assert isinstance(answer, rpc.Response) and answer.id == longest + "é"


def test_a_request_whose_id_is_an_integer_past_64_bits_is_refused_under_no_id() -> None:
    """Signed or unsigned 64-bit integers are ids; past them, the error gives the
    digits' count and the bound, never the id."""
    for taken in (rpc.MIN_INT_ID, rpc.MAX_INT_ID):
        msg = envelope.decode_message(rpc.encode_request(taken, "ping"))
        assert isinstance(msg, rpc.Request) and msg.id == taken
    for refused, digits in ((rpc.MIN_INT_ID - 1, 19), (rpc.MAX_INT_ID + 1, 20), (10**4000, 4001)):
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % refused
        with pytest.raises(rpc.DecodeFailure) as caught:
            envelope.decode_message(line)
        assert caught.value.id is None and caught.value.code == rpc.INVALID_REQUEST
        assert f"an integer of {digits} digits" in caught.value.message
        assert f"{rpc.MIN_INT_ID} to {rpc.MAX_INT_ID}" in caught.value.message
        assert str(refused) not in caught.value.message
    # An answer is matched by its id, not kept by it.
    answer = envelope.decode_message(rpc.encode_result(10**300, {}))
    assert isinstance(answer, rpc.Response) and answer.id == 10**300


def test_pretty_printed_messages_decode_to_one_line_raw_parts() -> None:
    text = '{\r\n  "jsonrpc": "2.0",\n  "id": 4,\n  "result": {\n    "t": "a\\nb\u2028c"\n  }\n}'
    msg = envelope.decode_message(text.encode())
    assert isinstance(msg, rpc.Response)
    # Insignificant whitespace is gone; the string's escapes and U+2028 are untouched.
    assert bytes(msg.result) == '{"t":"a\\nb\u2028c"}'.encode()
    assert rpc.encode_result(4, msg.result) == (
        '{"jsonrpc":"2.0","id":4,"result":{"t":"a\\nb\u2028c"}}'.encode()
    )
    # A broken message still gets the parse error it always got.
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(b'{\n"jsonrpc": "2.0",\n"id": 1,')
    assert info.value.code == rpc.PARSE_ERROR


def _same_as_general(data: bytes) -> None:
    """Whatever the one-pass response decoder accepts, the general one reads alike."""
    fast = envelope.decode_response(data)
    if fast is None:
        return
    msg = envelope.decode_message(data)
    assert isinstance(msg, rpc.Response)
    assert (msg.id, bytes(msg.result)) == (fast.id, bytes(fast.result))


@given(st.binary(max_size=300))
def test_the_one_pass_response_decoder_never_accepts_what_the_general_one_would_not(
    data: bytes,
) -> None:
    _same_as_general(data)


@given(st.integers(-(2**63), 2**63 - 1) | st.text(max_size=50), json_values)
def test_the_one_pass_response_decoder_reads_plain_responses(
    rid: int | str, result: object
) -> None:
    line = rpc.encode_result(rid, result)
    fast = envelope.decode_response(line) if line.isascii() else None
    if line.isascii():
        assert fast is not None
        assert fast.id == rid
        assert msgspec.json.decode(bytes(fast.result)) == result
    _same_as_general(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":true,"result":{}}',  # a bool is no id
        b'{"jsonrpc":"2.0","id":1.0,"result":{}}',
        b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"x","result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"a":"\xc3\xa9"}}',  # UTF-8 is checked elsewhere
        b'{"jsonrpc":"2.0","id":1,\r"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{]}',
        b'{"jsonrpc":"2.0","result":{}}',
    ],
)
def test_anything_but_a_plain_response_is_left_to_the_general_decoder(line: bytes) -> None:
    assert envelope.decode_response(line) is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":"\xff"}', "not valid UTF-8"),
        (
            b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 5000 + b"]" * 5000 + b"}",
            "nested too deeply",
        ),
        (b'{"jsonrpc":"2.0","id":1,"result":nope}', "not JSON"),
    ],
)
def test_a_line_that_cannot_be_parsed_says_why(line: bytes, why: str) -> None:
    with pytest.raises(rpc.DecodeFailure) as caught:
        envelope.decode_message(line)
    assert caught.value.unreadable == why


def test_a_byte_order_mark_in_front_is_refused_in_words_under_the_requests_id() -> None:
    line = b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}'
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(b"\xef\xbb\xbf" + line)
    assert info.value.code == rpc.PARSE_ERROR and info.value.id == 5
    assert "byte order mark (U+FEFF) in front" in info.value.message
    assert isinstance(info.value.readable, rpc.Request)


BIG = b"9" * 5000


def test_a_batch_of_responses_names_the_ids_it_answers() -> None:
    line = b'[{"jsonrpc":"2.0","id":17,"result":{}},{"jsonrpc":"2.0","id":"a","error":{}},'
    line += b'{"jsonrpc":"2.0","method":"ping","id":3}]'
    with pytest.raises(rpc.BatchedReplies) as info:
        envelope.decode_message(line)
    assert info.value.given == (17, "a")
    assert "JSON-RPC batch" in info.value.why and "a JSON-RPC batch" in info.value.message


@pytest.mark.parametrize("number", [BIG, b"1e400", b"-2.5E+999"])
def test_a_response_holding_a_number_no_decoder_reads_cannot_be_taken(number: bytes) -> None:
    line = b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"x":[' + number + b"]}}"
    assert envelope.decode_response(line) is None
    with pytest.raises(rpc.MalformedResponse) as info:
        envelope.decode_message(line)
    assert info.value.given == 7
    assert info.value.why.startswith("holding a number no JSON decoder reads (")
    # In a string it is text, and the line is taken in one pass.
    quoted = line.replace(number, b'"' + number + b'"')
    assert isinstance(envelope.decode_response(quoted), rpc.Response)


def test_a_request_holding_one_is_a_parse_error_under_its_id() -> None:
    line = b'{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"arguments":{"n":'
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(line + BIG + b"}}}")
    assert (info.value.code, info.value.id) == (rpc.PARSE_ERROR, "c")
    assert "the message holds a number no JSON decoder reads" in info.value.message
    note = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1e999}}'
    with pytest.raises(rpc.DecodeFailure) as info:
        envelope.decode_message(note)
    assert (info.value.code, info.value.id) == (rpc.PARSE_ERROR, None)
