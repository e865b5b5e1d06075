"""A call's arguments read once for a person to be shown: where JSON readers part ways
(msgspec, which shows arguments, and Python's json, which a server may read them with),
the reading either keeps the text as sent (a number as written) or says the arguments
cannot be shown as the server will read them; never one reader's pick shown while the
other runs."""

from __future__ import annotations

import json
from decimal import Decimal

import msgspec
import pytest

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.masking import SecretSet, marker
from mcpd.policy.shown.reading import KEY_SHOWN, Members, RepeatedKey, Unshowable, read_arguments
from mcpd.policy.shown.showing import whole_json
from protocol.lines.nesting import MAX_DEPTH

SECRET = "tok-9f8e7d6c5b4a3210"
WHERE = "servers.github.env.GITHUB_TOKEN"


def readers_part(raw: bytes) -> bool:
    """Whether msgspec and Python's json read ``raw`` differently, or one not at all."""
    try:
        by_msgspec: object = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        by_msgspec = type(exc)
    try:
        by_python: object = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        by_python = type(exc)
    return repr(by_msgspec) != repr(by_python)


# Arguments the two readers part on that are JSON a server may read: none is shown.
DOUBTFUL = {
    "past a double": b'{"repo":"acme/prod","action":"delete","pad":1e400}',
    "past a double, negative": b'{"pad":-1E+400}',
    "just past a double": b'{"pad":1.8e308}',
    "half a pair": b'{"pad":"\\ud800"}',
    "half a pair, the other half": b'{"pad":"x\\udfff"}',
    "half a pair in a key": b'{"\\udc00":1}',
    "half a pair in an array": b'{"pad":["ok","\\ud83d"]}',
    "a number too long to read": b'{"n":' + b"9" * 5000 + b"}",
}
# What is not JSON, or not text, that one reader or both take: not shown either.
UNREADABLE = {
    "NaN": b'{"pad":NaN}',
    "Infinity": b'{"pad":-Infinity}',
    "a byte order mark": b'\xef\xbb\xbf{"pad":1}',
    "a vertical tab for a space": b'{"pad":\x0b1}',
    "a form feed for a space": b'{"pad":\x0c1}',
    "a no-break space for a space": b'{"pad":\xc2\xa01}',
    "an ideographic space after": '{"pad":1}\u3000'.encode(),
    "a NUL after": b'{"pad":1}\x00',
    "a digit of another script": '{"pad":\u0661}'.encode(),
    "a raw tab in a string": b'{"pad":"a\tb"}',
    "an overlong encoding": b'{"pad":"\xc0\xaf"}',
    "a surrogate encoded as UTF-8": b'{"pad":"\xed\xa0\x80"}',
    "trailing text": b'{"pad":1} x',
    "nothing": b"",
}


@pytest.mark.parametrize("raw", DOUBTFUL.values(), ids=DOUBTFUL.keys())
def test_arguments_readers_read_otherwise_are_not_shown(raw: bytes) -> None:
    reading = read_arguments(raw)
    assert reading.doubt is not None
    with pytest.raises(Unshowable):
        reading.check()


# Numbers a reader of doubles (JavaScript's, most servers') reads as other numbers than a
# reader of decimals or of big integers (Python's): none is shown.
READ_AS_OTHERS = {
    "an integer past 2**53": b'{"account":9007199254740993}',
    "a larger one": b'{"amount":100000000000000000000000001}',
    "negative": b'{"n":-123456789012345678901234567890}',
    "digits past a double's": b'{"n":0.1000000000000000000000000001}',
    "too small for a double": b'{"n":1e-400}',
}


def read_as_doubles(raw: bytes) -> object:
    return json.loads(raw, parse_int=float, parse_float=float)


def read_as_decimals(raw: bytes) -> object:
    return json.loads(raw, parse_float=Decimal)


def numbers_of(value: object) -> list[Decimal]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_of(v)]
    return [Decimal(value)] if isinstance(value, int | float | Decimal) else []


@pytest.mark.parametrize("raw", READ_AS_OTHERS.values(), ids=READ_AS_OTHERS.keys())
def test_numbers_a_reader_of_doubles_reads_otherwise_are_not_shown(raw: bytes) -> None:
    # That the two readers part on each: a person shown one would approve the other.
    assert numbers_of(read_as_doubles(raw)) != numbers_of(read_as_decimals(raw))
    reading = read_arguments(raw)
    assert reading.doubt is not None and "by a reader that uses doubles" in reading.doubt
    with pytest.raises(Unshowable):
        reading.check()


@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_what_is_not_json_is_not_read(raw: bytes) -> None:
    with pytest.raises(Unshowable):
        read_arguments(raw)


@pytest.mark.parametrize("raw", DOUBTFUL.values(), ids=DOUBTFUL.keys())
def test_each_doubtful_case_is_one_the_readers_part_on(raw: bytes) -> None:
    assert readers_part(raw)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # Readers write these otherwise (0, 1.1, 100.0) but read the same number: shown
        # as written. 2**64 and 0.1 are read alike by a reader of doubles and one of
        # decimals.
        (b'{"n":-0}', '{"n":-0}'),
        (b'{"n":-0.0}', '{"n":-0.0}'),
        (b'{"n":1.10}', '{"n":1.10}'),
        (b'{"n":1E2}', '{"n":1E2}'),
        (b'{"n":18446744073709551616}', '{"n":18446744073709551616}'),
        (b'{"n":0.1}', '{"n":0.1}'),
        (b'{"n":9007199254740992}', '{"n":9007199254740992}'),
        # Both halves of a pair are one character; the whitespace JSON allows is none.
        (b' {\r\n\t"s" : "\\ud83d\\ude00" }\n', '{"s":"\U0001f600"}'),
        (b'{"s":"\\u00e9\\u0000"}', '{"s":"\u00e9\\u0000"}'),
        (b"[]", "[]"),
        (b'"text"', '"text"'),
    ],
)
def test_what_readers_may_make_other_is_kept_as_written(raw: bytes, shown: str) -> None:
    reading = read_arguments(raw)
    reading.check()
    assert whole_json(reading) == shown


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'{"mode":"delete","mode":"read"}', "mode"),
        (b'{"a":{"b":[1,{"c":1,"d":2,"c":3}]}}', "c"),
        (b'[{"x":1},{"y":1,"y":2}]', "y"),
        # The same key however it is written: a decoder reads both as "mode".
        (b'{"mode":"delete","mo\\u0064e":"read"}', "mode"),
        (b'{"\\u001b[2J":1,"\\u001b[2J":2}', "\\x1b[2J"),
        (b'{"a":1,"b":{"a":2},"c":[{"a":3}]}', None),
        (b'{"a":1,"A":2}', None),
        (b"{}", None),
    ],
)
def test_a_key_given_twice_in_one_object_is_found_at_any_depth(raw: bytes, key: str | None) -> None:
    reading = read_arguments(raw)
    assert reading.repeated == key
    if key is not None:
        with pytest.raises(RepeatedKey) as found:
            reading.check()
        assert found.value.key == key


def test_a_key_given_twice_is_kept_with_both_values_in_order() -> None:
    reading = read_arguments(b'{"mode": "delete", "x": 1, "mode": "read"}')
    assert isinstance(reading.value, Members)
    assert whole_json(reading) == '{"mode":"delete","x":1,"mode":"read"}'


def test_a_long_repeated_key_is_cut() -> None:
    long = "k" * 1000
    reading = read_arguments(f'{{"{long}":1,"{long}":2}}'.encode())
    assert reading.repeated is not None
    assert len(reading.repeated) == KEY_SHOWN and reading.repeated.endswith("…")


def test_arguments_nested_deeper_than_the_reader_goes_are_not_read() -> None:
    # Past it a key could be given twice unseen.
    deep = b'{"cmd":"ls","cmd":"rm -rf ~","x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(Unshowable, match="nested too deeply"):
        read_arguments(deep)


def nested(depth: int) -> bytes:
    """Arguments ``depth`` levels deep, the outermost object counted, with brackets in
    a string besides, which count for nothing."""
    inner = depth - 1
    return b'{"note":"[[[{{{","a":' + b"[" * inner + b"]" * inner + b"}"


def from_depth(frames: int, raw: bytes) -> str:
    """How ``raw`` is read with ``frames`` more calls on the stack: shown, or why not."""
    if frames:
        return from_depth(frames - 1, raw)
    try:
        read_arguments(raw).check()
    except Unshowable as exc:
        return str(exc)
    return "shown"


@pytest.mark.parametrize("frames", [0, 200])
def test_arguments_are_read_to_one_depth_however_deep_the_call_reading_them(
    frames: int,
) -> None:
    assert from_depth(frames, nested(MAX_DEPTH)) == "shown"
    assert from_depth(frames, nested(MAX_DEPTH + 1)) == (
        f"they are nested too deeply (more than {MAX_DEPTH} levels)"
    )


def test_secrets_are_masked_in_keys_strings_and_numbers_as_read() -> None:
    secrets = SecretSet([HeldSecret(WHERE, SECRET), HeldSecret("daemon.pin", "31415926")])
    raw = json.dumps({"auth": SECRET, SECRET: [1, {"t": f"Bearer {SECRET}"}], "pin": 31415926})
    text = whole_json(read_arguments(raw.encode(), secrets))
    assert SECRET not in text and "31415926" not in text
    assert json.loads(text) == {
        "auth": marker(WHERE),
        marker(WHERE): [1, {"t": f"Bearer {marker(WHERE)}"}],
        "pin": marker("daemon.pin"),
    }


def test_a_secret_spelled_with_escapes_is_masked_too() -> None:
    secrets = SecretSet([HeldSecret(WHERE, SECRET)])
    text = whole_json(read_arguments(b'{"k":"tok\\u002d9f8e7d6c5b4a3210"}', secrets))
    assert text == json.dumps({"k": marker(WHERE)}, separators=(",", ":"))
