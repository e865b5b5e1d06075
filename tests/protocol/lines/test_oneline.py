from __future__ import annotations

from protocol.lines.oneline import line_fault, one_line


def test_line_fault_names_what_is_wrong_with_a_line() -> None:
    assert line_fault(b'{"jsonrpc":"2.0","method":"x"}') is None
    assert line_fault(b'{"a":\n1}') == "it contains a raw line break"
    assert line_fault(b'{"a":1}\r') == "it contains a raw line break"
    assert (line_fault(b'{"a":') or "").startswith("it is not valid JSON")
    assert (line_fault(b'{"a":1} {"b":2}') or "").startswith("it is not valid JSON")


def test_one_line_drops_raw_line_breaks_between_tokens_and_keeps_strings_as_they_were() -> None:
    assert one_line(b'{"a": 1}') == b'{"a": 1}'  # nothing to do: the bytes it was given
    assert one_line(b'{\r\n "t": "a\\nb",\n "u": [1,\n2]\n}') == b'{"t":"a\\nb","u":[1,2]}'
