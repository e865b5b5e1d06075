"""Numbers in a JSON text that common decoders do not read, told from its bytes.

JSON sets no bound on a number; its readers do. Python's ``json`` refuses an integer of
more than 4300 digits, msgspec refuses it and any number past the largest double
(``1e400``), which JavaScript reads as Infinity: a message holding one reaches some
peers as an error, some as a wrong value, and some (an SDK whose reader fails) as
nothing at all. A message holding one is no message mcpd passes on.

Only numbers that could be such a number are read: a run of ``LONG_RUN`` digits or an
exponent of three digits, first looked for in the text as a whole with byte operations
(``CLASSES``, ``LONG_RUN``, ``LONG_EXPONENT``: the common message, which holds neither,
costs one pass in C), then, where one is found, checked outside the text's strings.
"""

from __future__ import annotations

import math
import re
from typing import Final

from ..lines.nesting import STRING

# Python's default bound on the digits of an integer it reads from text.
MAX_INTEGER_DIGITS: Final = 4300
# No number of fewer digits in its integer part and fraction, and a two-digit exponent,
# is past the largest double (about 1.8e308).
_RUN: Final = 200
# The bytes of a text as what they are to a number: a digit, an exponent's letter, a
# sign, a point, white space other than a line break, a line break (either: which the
# callers that take one line look for too), what comes before a value (a colon, a
# comma, a bracket), or anything else.
_DIGIT, _EXP, _POINT, _MINUS, _PLUS, _SPACE, _BREAK, _BEFORE, _OTHER = b"0e.-+ \n,x"


def _classes() -> bytes:
    table = bytearray([_OTHER]) * 256
    for chars, kind in (
        (b"0123456789", _DIGIT),
        (b"eE", _EXP),
        (b".", _POINT),
        (b"-", _MINUS),
        (b"+", _PLUS),
        (b" \t", _SPACE),
        (b"\r\n", _BREAK),
        (b":,[", _BEFORE),
    ):
        for c in chars:
            table[c] = kind
    return bytes(table)


CLASSES: Final = _classes()
# In a text translated by ``CLASSES`` with ``+`` deleted: a long run of digits, or a
# digit followed by an exponent of three digits or more (a negative one, which a reader
# takes to zero at worst, is not looked for).
LONG_RUN: Final = bytes([_DIGIT]) * _RUN
LONG_EXPONENT: Final = bytes([_DIGIT, _EXP, _DIGIT, _DIGIT, _DIGIT])
PIECE: Final = 1 << 16
# The same with ``+`` kept (which places stay where they are in the text).
_NEEDLES: Final = (LONG_RUN, LONG_EXPONENT, bytes([_DIGIT, _EXP, _PLUS, _DIGIT, _DIGIT, _DIGIT]))
# How far before a digit looked at a number can begin: a sign, fewer than ``_RUN``
# digits, a point and fewer than ``_RUN`` digits more.
_WINDOW: Final = 2 * _RUN + 8
_IN_NUMBER: Final = bytes([_DIGIT, _EXP, _POINT, _MINUS, _PLUS])
_WHITE: Final = bytes([_SPACE, _BREAK])
_RUN_END: Final = re.compile(rb"[^0]")  # past a run of digits' classes
# Numbers found in a text's text (not its strings) that are read one by one: past it,
# the message is refused for holding too many to read.
MOST_READ: Final = 4096
_LOOKED_AT: Final = 64  # places in the whole text looked at before its strings are taken out
_NUMBER: Final = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_DOUBLE: Final = "a number no JSON decoder reads (one past the largest double, about 1.8e308)"


def plain_line(line: bytes) -> bool:
    """Whether ``line`` is one line (no line break of either kind in it) whose numbers
    common decoders all read: what a fast path that keeps part of a message raw, unread,
    may take. Asked of every message such a path sees, so the common line, short and
    holding no long number, costs one translation in C; a long one is not copied whole."""
    if len(line) <= PIECE:
        classes = line.translate(CLASSES, b"+")
        return b"\n" not in classes and not (
            (LONG_RUN in classes or LONG_EXPONENT in classes) and number_fault(line)
        )
    return b"\n" not in line and b"\r" not in line and number_fault(line) is None


def number_fault(text: bytes) -> str | None:
    """What is wrong with the numbers of ``text``, a JSON text, in a few words; None when
    each is read by common decoders. The text is read a piece at a time, never copied
    whole, unless a number that may be past the bounds is found outside its strings."""
    if not _maybe_outside_strings(text):
        return None
    return _fault_outside_strings(STRING.sub(b'""', text))


def _maybe_outside_strings(text: bytes) -> bool:
    """Whether a place that looks like a number past the bounds may be one: a few are
    looked at, each ruled out only where what comes before it shows it is text inside a
    string (a letter or a quote before it, as in a base64 image or a hash)."""
    looked = 0
    for start in range(0, len(text), PIECE):
        # Each piece is read with what comes before it, for the places in it.
        low = max(0, start - _WINDOW)
        classes = text[low : start + PIECE + _RUN].translate(CLASSES)
        first = start - low
        for needle in _NEEDLES:
            end = first + PIECE + len(needle) - 1
            at = classes.find(needle, first, end)
            while at >= 0:
                looked += 1
                if looked > _LOOKED_AT:
                    return True  # more of them than are looked at: the strings are taken out
                head = classes[max(0, at - _WINDOW) : at]
                before = head.rstrip(_IN_NUMBER).rstrip(_WHITE)
                if not before or before[-1] == _BEFORE:
                    return True
                past = at + len(needle)
                if needle is LONG_RUN:
                    run_end = _RUN_END.search(classes, past)
                    past = len(classes) if run_end is None else run_end.start()
                at = classes.find(needle, past, end)
    return False


def _fault_outside_strings(skeleton: bytes) -> str | None:
    """``number_fault`` of a JSON text whose strings are all empty: every digit in it
    is a number's."""
    classes = skeleton.translate(CLASSES)
    needles = _NEEDLES
    found = [classes.find(needle) for needle in needles]
    read = 0
    while True:
        waiting = [at for at in found if at >= 0]
        if not waiting:
            return None
        at = min(waiting)
        read += 1
        if read > MOST_READ:
            return (
                f"more than {MOST_READ} numbers of {_RUN} digits or more, or with an "
                "exponent of three digits, which is more than mcpd reads"
            )
        head = classes[max(0, at - _WINDOW) : at]
        start = at - (len(head) - len(head.rstrip(_IN_NUMBER)))
        number = _NUMBER.match(skeleton, start)
        if number is None or number.end() <= at:
            end = at + 1  # not a number's start after all: looked at no further
        else:
            fault = _past_bounds(number.group())
            if fault is not None:
                return fault
            end = number.end()
        found = [
            at if at < 0 or at >= end else classes.find(needle, end)
            for at, needle in zip(found, needles, strict=True)
        ]


def _past_bounds(number: bytes) -> str | None:
    """What is wrong with one JSON number, if common decoders do not read it."""
    if b"." in number or b"e" in number or b"E" in number:
        return None if math.isfinite(float(number)) else _DOUBLE
    # msgspec counts a minus sign among the digits it bounds, Python does not.
    if len(number) <= MAX_INTEGER_DIGITS:
        return None
    return (
        f"a number no JSON decoder reads (an integer written in {len(number)} "
        f"characters, past the {MAX_INTEGER_DIGITS} digits decoders read)"
    )
