"""A secret is found in JSON bytes however an encoder escaped its characters: each
character as it is or as ``\\uXXXX`` in either case (a pair past U+FFFF), ``/`` as
``\\/``, and ``"``, ``\\`` and controls as their short escapes, one occurrence spelled
one way and the next another."""

from __future__ import annotations

import json

import msgspec
import pytest

from mcpd.policy.spelling import Spellings

SECRET = "Zq9&x<Lk>Pw7='a/b\"c\\d\n\u00e9\U0001f600=="


def each_escaped(text: str, upper: bool = False) -> bytes:
    """Every character a ``\\u`` escape (its UTF-16 code units)."""
    data = text.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    return "".join(f"\\u{u:04X}" if upper else f"\\u{u:04x}" for u in units).encode()


def html_safe(text: str) -> bytes:
    """As Go's and Gson's encoders write it: ``<>&='`` escaped, the rest as JSON must."""
    out = msgspec.json.encode(text)[1:-1].decode()
    for c in "<>&='":
        out = out.replace(c, f"\\u{ord(c):04x}")
    return out.encode()


SPELLINGS = {
    "as msgspec writes it": msgspec.json.encode(SECRET)[1:-1],
    "as Python writes it": json.dumps(SECRET)[1:-1].encode(),
    "as Go and Gson write it": html_safe(SECRET),
    "every character escaped": each_escaped(SECRET),
    "every character escaped, upper case hex": each_escaped(SECRET, upper=True),
    "slash escaped": msgspec.json.encode(SECRET)[1:-1].replace(b"/", b"\\/"),
    "some escaped, in either case": msgspec.json.encode(SECRET)[1:-1]
    .replace(b"Z", b"\\u005A")
    .replace(b"x", b"\\u0078")
    .replace(b"=", b"\\u003D", 1),
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
# Beside a number no double holds too: the bytes are searched as they are.
@pytest.mark.parametrize("beside", [b"1", b"1e400"], ids=["readable", "unreadable"])
def test_a_secret_is_found_however_it_is_spelled(spelling: bytes, beside: bytes) -> None:
    found = Spellings([SECRET, "another-secret"])
    text = b'{"type":"text","text":"x ' + spelling + b' y"}'
    assert found.found_in(b'{"content":[' + text + b'],"n":' + beside + b"}")


@pytest.mark.parametrize("beside", [b"1", b"1e400"], ids=["readable", "unreadable"])
def test_what_spells_another_text_or_part_of_the_secret_is_not_found(beside: bytes) -> None:
    found = Spellings([SECRET])
    for spelling in (
        html_safe(SECRET)[:-7],
        b"Zq9\\u0026x\\u003cLk\\u003e",
        # An escape of a character other than the secret's.
        html_safe(SECRET).replace(b"\\u0026", b"\\u0027"),
        # An escaped backslash, then what reads as an escape but is text.
        html_safe(SECRET).replace(b"\\u0026", b"\\\\u0026"),
    ):
        assert not found.found_in(b'{"text":"' + spelling + b'","n":' + beside + b"}")


def test_no_texts_make_no_spellings() -> None:
    assert Spellings.of(["", ""]) is None
