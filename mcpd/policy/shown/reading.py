"""A call's arguments read once, for a person to be shown: by one reader, whose reading
is what every view of them is written from (``showing``) and what the audit log keeps
when a plain decoding would not do (``audit.arguments``).

The server is sent the arguments' bytes as they came, and JSON readers do not all read
the same bytes alike. So the reading keeps what they may read differently as it was
sent: each object's members in order, a key given twice and all; each number as it is
written (``1.10``, ``-0``, more digits than a float holds). What could still be read
two ways is noted (``Reading.doubt``, ``Reading.repeated``): a key given twice (readers
keep the first value, or the last, or refuse), a number past what a double holds
(``1e400``: infinity to one reader, an error to another), a number a reader of doubles
reads as another (``9007199254740993`` as ``9007199254740992``), a number too long to
read at a glance, half of a UTF-16 pair (a string one reader takes and another refuses).
Arguments that are not UTF-8 or not JSON (``NaN``, a byte order mark), or that are
nested deeper than ``nesting.MAX_DEPTH``, cannot be read at all (``Unshowable``).

Strings, keys and numbers are masked as they are read (mcpd's secrets become their
markers), so nothing written from a reading can show a secret.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Final, NoReturn, TypeAlias

import msgspec

from protocol.lines.nesting import MAX_DEPTH, deeper_than
from protocol.shown.visible import visible

from ..redaction.masking import SecretSet

# The longest number a person is shown as it is: past it, a number is no value anyone
# reads at a glance, and readers differ on whether they read it at all.
MAX_NUMBER: Final = 100
# How much of a repeated key is said back.
KEY_SHOWN: Final = 60
# An escape that may write half of a UTF-16 pair; without one, no string can hold half.
_HALF_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_HALF: Final = re.compile("[\ud800-\udfff]")
_TOO_DEEP: Final = f"they are nested too deeply (more than {MAX_DEPTH} levels)"

Mask = Callable[[str], str]


class Unshowable(Exception):
    """The arguments cannot be shown to a person as the server will read them; the
    message says why, in words for the model and the audit record."""


class RepeatedKey(Unshowable):
    """An object of the arguments gives ``key`` (written out, kept short) twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"they give the key '{key}' more than once")
        self.key = key


class Members(list[tuple[str, "Value"]]):
    """An object's members in the order sent, a key given twice and all."""


class Number(str):
    """A number as it was written."""


Value: TypeAlias = "Members | list[Value] | str | bool | None"
"""What arguments are read as: strings and ``Number`` both ``str``."""
Scalar: TypeAlias = str | bool | None


class Reading:
    """What was read: ``value`` (``Members``, lists, strings, ``Number``, True, False,
    None), how many keys it gives in all, what could be read otherwise, and which of
    its lists hold an object at some depth (``keyed``, by ``id``)."""

    __slots__ = ("doubt", "keyed", "keys", "repeated", "value")

    def __init__(self, value: Value, keys: int, repeated: str | None, doubt: str | None) -> None:
        self.value = value
        self.keys = keys
        self.repeated = repeated
        self.doubt = doubt
        self.keyed: set[int] = set()

    def check(self) -> None:
        """Raises ``RepeatedKey`` or ``Unshowable`` when another reader could read the
        arguments otherwise than they would be shown."""
        if self.repeated is not None:
            raise RepeatedKey(self.repeated)
        if self.doubt is not None:
            raise Unshowable(self.doubt)


class _Hooks:
    def __init__(self) -> None:
        self.keys = 0
        self.repeated: str | None = None
        self.doubt: str | None = None

    def members(self, pairs: list[tuple[str, Value]]) -> Members:
        self.keys += len(pairs)
        if self.repeated is None and len(dict(pairs)) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    shown = visible(key)
                    cut = shown[: KEY_SHOWN - 1] + "…"
                    self.repeated = shown if len(shown) <= KEY_SHOWN else cut
                    break
                seen.add(key)
        return Members(pairs)

    def number(self, text: str) -> Number:
        if self.doubt is None:
            if len(text) > MAX_NUMBER:
                self.doubt = f"a number is written with {len(text)} characters"
            elif not text.lstrip("-").isdigit() and math.isinf(float(text)):
                self.doubt = f"the number {text} is past what a double holds"
            else:
                self.doubt = _read_otherwise(text)
        return Number(text)

    def constant(self, text: str) -> NoReturn:
        raise Unshowable(f"{text} is not JSON")


def _read_otherwise(text: str) -> str | None:
    """What a reader that makes every number a double (JavaScript's, and many another
    server's) reads ``text`` as, when that is another number than the one written: an
    integer past 2**53 that no double holds, digits past a double's precision, a value
    too small for one. A double that holds the number exactly, or whose shortest
    writing is the number, reads the same to everyone."""
    double = float(text)
    written = Decimal(text)
    if written == Decimal(double) or written == Decimal(repr(double)):
        return None
    return f"the number {text} is read as {double!r} by a reader that uses doubles"


def read_arguments(raw: bytes | msgspec.Raw, secrets: SecretSet | None = None) -> Reading:
    """``raw`` read, with ``secrets`` masked. Raises ``Unshowable`` when it cannot be
    read at all."""
    try:
        text = str(raw, "utf-8")
    except UnicodeDecodeError:
        raise Unshowable("they are not UTF-8") from None
    # Bounded here, not by the decoder, which goes as deep as the stack it is called
    # from lets it: one text must be read alike wherever it is read from.
    if deeper_than(raw if isinstance(raw, bytes) else bytes(raw)):
        raise Unshowable(_TOO_DEEP)
    hooks = _Hooks()
    try:
        value: Value = json.loads(
            text,
            object_pairs_hook=hooks.members,
            parse_int=hooks.number,
            parse_float=hooks.number,
            parse_constant=hooks.constant,
        )
    except RecursionError:  # beyond a stack mcpd reaches, under the bound: said the same
        raise Unshowable(_TOO_DEEP) from None
    except ValueError:
        raise Unshowable("they are not JSON") from None
    reading = Reading(value, hooks.keys, hooks.repeated, hooks.doubt)
    halves = _HALF_ESCAPE.search(raw) is not None
    mask = secrets.mask if secrets is not None and secrets.size else None
    if isinstance(value, list):
        _walk(reading, value, mask, halves)
    else:
        reading.value = _scalar(reading, value, mask, halves)
    return reading


def _walk(reading: Reading, top: Members | list[Value], mask: Mask | None, halves: bool) -> None:
    """Masks what ``top`` holds in place, looks for halves of pairs where an escape may
    have written one (``halves``), and notes the lists that hold an object."""
    keyed = reading.keyed
    path: list[Members | list[Value]] = []  # the containers above the one being visited
    stack: list[tuple[Members | list[Value], int]] = [(top, 0)]
    while stack:
        container, depth = stack.pop()
        del path[depth:]
        if isinstance(container, Members):
            for above in reversed(path):
                if isinstance(above, Members):
                    continue
                if id(above) in keyed:
                    break  # and so is every list above it
                keyed.add(id(above))
            for n, (key, member) in enumerate(container):
                if isinstance(member, list):
                    stack.append((member, depth + 1))
                else:
                    member = _scalar(reading, member, mask, halves)
                container[n] = (_string(reading, key, mask, halves), member)
        else:
            for n, item in enumerate(container):
                if isinstance(item, list):
                    stack.append((item, depth + 1))
                else:
                    container[n] = _scalar(reading, item, mask, halves)
        path.append(container)


def _scalar(reading: Reading, value: Scalar, mask: Mask | None, halves: bool) -> Scalar:
    if isinstance(value, Number):
        if mask is None:
            return value
        masked = mask(value)  # a number whose digits hold a secret becomes its marker
        return value if masked == value else masked
    if isinstance(value, str):
        return _string(reading, value, mask, halves)
    return value


def _string(reading: Reading, text: str, mask: Mask | None, halves: bool) -> str:
    if halves and reading.doubt is None and _HALF.search(text):
        reading.doubt = "a string holds half of a UTF-16 surrogate pair"
    return text if mask is None else mask(text)
