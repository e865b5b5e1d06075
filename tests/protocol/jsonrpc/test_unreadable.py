from __future__ import annotations

import pytest

from protocol.jsonrpc import unreadable


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"t":"\xff"}}', 7),
        (b'{"jsonrpc":"2.0","id":"a\\"b","error":{"code":1,"message":"\xc3"}}', 'a"b'),
        (b'{"result":{"t":"\xff"},"jsonrpc":"2.0","id":8}', 8),
        (b'{"jsonrpc":"2.0","id":3,"result":' + b"[" * 5000 + b"]" * 5000 + b"}", 3),
        # Deeper than any decoder goes, to the length the scan reads.
        (b'{"jsonrpc":"2.0","id":6,"result":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001, 6),
        (b'{"id":2,"result":' + (b"[" * 20 + b"]" * 20) * 20_000 + b"}", 2),
        (b'{"jsonrpc":"2.0","id":3,"result":{"ok":nope}}', 3),
        (b'{"result":[{"a":[]}],"id":4,"jsonrpc":"2.0"}', 4),
    ],
)
def test_an_unreadable_replys_id_is_found_where_it_is_certain(line: bytes, rid: object) -> None:
    assert unreadable.reply_id(line) == rid


@pytest.mark.parametrize(
    "line",
    [
        # The peer's own request: its id is not one of ours.
        b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"t":"\xff"}}',
        b'{"jsonrpc":"2.0","id":5,"method":"x","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
        # Cut off: the rest (and the real answer) may follow.
        b'{"jsonrpc":"2.0","id":3,"result":{',
        b'{"jsonrpc":"2.0","id":3,"result":' + b"[" * 100_000 + b"]" * 99_999 + b"}",
        b'{"id":2,"result":' + b"]" * 20 + b"[" * 20 + b"}",
        b'{"result":{"x":{"a":"\xff","jsonrpc":"2.0","id":4}',
        b'{"jsonrpc":"2.0","id":3,"result":"never ends}',
        # An id that is not the outer object's own, or not an id.
        b'{"result":{"id":9},"x":"\xff"}',
        b'{"result":1}{"a":"\xff","id":4}',
        b'{"jsonrpc":"2.0","id":3.5,"result":{"\xff":1}}',
        b'{"jsonrpc":"2.0","id":true,"result":{"\xff":1}}',
        b"[INFO] id 3 result",
    ],
)
def test_an_unreadable_line_whose_id_is_uncertain_answers_nothing(line: bytes) -> None:
    assert unreadable.reply_id(line) is None


@pytest.mark.parametrize(
    ("head", "tail", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"x":"', b"", 7),
        (b'{ "id" : "a\\"b", "result":', b"", 'a"b'),
        (b'{"result":{"x":"', b'..."}},"id":42}', 42),
        (b'{"result":', b'"id":true}', None),
        (b'{"jsonrpc":"2.0","result":{"id":3', b"", None),
    ],
)
def test_a_message_too_large_to_decode_has_its_id_read_at_its_edges(
    head: bytes, tail: bytes, rid: object
) -> None:
    assert unreadable.id_at_edges(head, tail) == rid


@pytest.mark.parametrize("end", [b"}", b"\\"])
def test_a_string_of_escaped_quotes_that_never_ends_is_no_reply(end: bytes) -> None:
    head = b'{"id":1,"result":"' + b'\\"{' * 5_000
    assert unreadable.reply_id(head + end) is None
    assert unreadable.reply_id(head + b'"}') == 1  # ended, it is one
