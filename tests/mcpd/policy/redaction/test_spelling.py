"""A secret is found in JSON bytes in each form an encoder writes it: what is not ASCII
as it is or as ``\\uXXXX`` (a pair past U+FFFF), what HTML-safe encoders escape
(``<``, ``>``, ``&``; ``=`` and ``'``) escaped, the hex in either case, ``/`` as ``\\/``,
and ``"``, ``\\`` and controls as their short escapes."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import TypeAlias

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpd.config.credentials.secrets import SECRET_FILE_LIMIT
from mcpd.policy.redaction.spelling import Spellings, json_forms, tree_pattern

SECRET = "Zq9&x<Lk>Pw7='a/b\"c\\d\n\u00e9\U0001f600=="


def each_escaped(text: str) -> bytes:
    """Every character a ``\\u`` escape (its UTF-16 code units), as no encoder writes."""
    data = text.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    return "".join(f"\\u{u:04x}" for u in units).encode()


def encoded(text: str, safe: str = "", ascii: bool = False, upper: bool = False) -> bytes:
    """As an encoder writes it inside a string: ``safe`` escaped beyond what JSON
    requires, what is not ASCII escaped too (``ascii``), hex in upper case (``upper``)."""
    out = json.dumps(text, ensure_ascii=ascii)[1:-1]
    for c in safe:
        out = out.replace(c, f"\\u{ord(c):04x}")
    if upper:
        out = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m[1].upper(), out)
    return out.encode()


SPELLINGS = {
    "as msgspec writes it": msgspec.json.encode(SECRET)[1:-1],
    "as Python writes it": encoded(SECRET, ascii=True),
    "as Python writes it, upper case hex": encoded(SECRET, ascii=True, upper=True),
    "as Go writes it": encoded(SECRET, "<>&"),
    "as Gson writes it": encoded(SECRET, "<>&='"),
    "as Gson writes it, upper case hex": encoded(SECRET, "<>&='", upper=True),
    "slash escaped": msgspec.json.encode(SECRET)[1:-1].replace(b"/", b"\\/"),
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
        encoded(SECRET, "<>&='")[:-7],
        b"Zq9\\u0026x\\u003cLk\\u003e",
        # An escape of a character other than the secret's.
        encoded(SECRET, "<>&='").replace(b"\\u0026", b"\\u0027"),
        # An escaped backslash, then what reads as an escape but is text.
        encoded(SECRET, "<>&='").replace(b"\\u0026", b"\\\\u0026"),
    ):
        assert not found.found_in(b'{"text":"' + spelling + b'","n":' + beside + b"}")


def test_no_texts_make_no_spellings() -> None:
    assert Spellings.of(["", ""]) is None


def test_a_spelling_no_encoder_writes_is_not_looked_for_in_the_bytes() -> None:
    # What mcpd decodes and writes again is searched again as mcpd writes it (guard);
    # in bytes passed on as they came, only a writer hiding the secret spells it so.
    found = Spellings([SECRET])
    assert not found.found_in(b'{"text":"' + each_escaped(SECRET) + b'"}')


def test_many_secrets_sharing_beginnings_are_each_found() -> None:
    # The forms are searched as a tree of shared beginnings: one that is the start of
    # another, and two that part only at their last character, are each found.
    texts = ["token-abcdef", "token-abcdef-longer", "token-abcdeg", "other/path=="]
    found = Spellings(texts)
    for text in texts:
        for form in (encoded(text), encoded(text, "<>&='", upper=True)):
            assert found.found_in(b'{"t":"x' + form + b'y"}'), form
    assert not found.found_in(b'{"t":"token-abcde"}')


Trie: TypeAlias = dict[int, "Trie"]


def trie_pattern(forms: set[bytes]) -> bytes:
    """The same pattern, built as a tree with a node a byte: plain to read, slow to run."""
    end = -1
    root: Trie = {}
    for form in forms:
        node = root
        for byte in form:
            if end in node:
                break
            node = node.setdefault(byte, {})
        else:
            node.clear()
            node[end] = {}

    def branches(node: Trie) -> bytes:
        if end in node:
            return b""
        parts = []
        for byte in sorted(node):
            run, child = [byte], node[byte]
            while end not in child and len(child) == 1:
                ((next_byte, child),) = child.items()
                run.append(next_byte)
            parts.append(re.escape(bytes(run)) + branches(child))
        return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"

    return branches(root)


@given(st.lists(st.text(alphabet='ab/<"\\é\n', max_size=12), min_size=1, max_size=6))
def test_the_pattern_is_the_tree_of_the_forms_shared_beginnings(texts: list[str]) -> None:
    forms = {f for t in texts if t for f in json_forms(t)} or {b"x"}
    assert tree_pattern(forms) == trie_pattern(forms)


@pytest.mark.parametrize("size", [1, 100, 5000, 70000])
def test_a_long_secret_makes_the_same_pattern(size: int) -> None:
    secret = ("Zq9&x<L/k>P\u00e9" * size)[:size]
    forms = json_forms(secret) | json_forms(secret[:-1] + "!") | json_forms("other-secret")
    assert tree_pattern(forms) == trie_pattern(forms)


def python_steps(build: Callable[[], object]) -> int:
    """How many lines of Python ``build`` runs (at C speed, a step may handle many bytes)."""
    steps = 0

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal steps
        steps += event == "line"
        return trace

    sys.settrace(trace)
    try:
        build()
    finally:
        sys.settrace(None)
    return steps


def test_building_the_pattern_of_a_secret_as_long_as_any_takes_no_step_a_byte() -> None:
    # A config secret is at most SECRET_FILE_LIMIT long; its pattern is built on the
    # daemon's thread at every reload, so its work follows the secret's length at C
    # speed, with Python steps a few a branch of the tree.
    def steps(size: int) -> int:
        secret = ("k/Z=q9<" * size)[:size]
        forms = json_forms(secret) | json_forms("another-secret")
        return python_steps(lambda: tree_pattern(forms))

    short, longest = steps(1024), steps(SECRET_FILE_LIMIT)
    assert longest < 2 * short, (short, longest)
