"""Shell-style patterns (``*``, ``?``, ``[seq]``, ``[!seq]``) matched without a regex.

Policy rules are matched against names that servers and agents choose. A pattern is
cut at its stars into segments; the first segment must match at the start, the last
at the end, and each one between at its leftmost place after the one before. Taking
the leftmost place is always right for segments separated by stars (whatever a later
place would leave, an earlier one leaves more), so nothing is ever tried twice: the
work is at most the name's length times the pattern's, and the pattern is the
config's. Matching is case-sensitive, as ``fnmatch.fnmatchcase``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeAlias


class _Class:
    """``[...]``: characters and ranges, or (``[!...]``) anything else."""

    __slots__ = ("chars", "negated", "ranges")

    def __init__(self, chars: frozenset[str], ranges: tuple[tuple[str, str], ...], negated: bool):
        self.chars = chars
        self.ranges = ranges
        self.negated = negated

    def admits(self, c: str) -> bool:
        inside = c in self.chars or any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negated


# One position of a segment: a literal character, any character (``?``), or a class.
Atom: TypeAlias = "str | _Class | None"
_ANY: Final = None


def _parse(pattern: str) -> list[list[Atom]]:
    """The pattern's segments, in order (one more than it has stars)."""
    segments: list[list[Atom]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            segments.append([])
            while i < n and pattern[i] == "*":  # ** is *
                i += 1
            continue
        if c == "?":
            segments[-1].append(_ANY)
        elif c == "[":
            parsed = _parse_class(pattern, i)
            if parsed is None:
                segments[-1].append("[")
            else:
                atom, i = parsed
                segments[-1].append(atom)
                continue
        else:
            segments[-1].append(c)
        i += 1
    return segments


def _parse_class(pattern: str, start: int) -> tuple[_Class, int] | None:
    """The class opening at ``start`` and where it ends, or None when it never closes
    (then the ``[`` is a character of its own, as in fnmatch)."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] == "!"
    if negated:
        i += 1
    body_start = i
    if i < len(pattern) and pattern[i] == "]":  # a ] first is one of the characters
        i += 1
    close = pattern.find("]", i)
    if close < 0:
        return None
    body = pattern[body_start:close]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            lo, hi = body[j], body[j + 2]
            if lo <= hi:  # a reversed range holds nothing
                ranges.append((lo, hi))
            j += 3
        else:
            chars.add(body[j])
            j += 1
    return _Class(frozenset(chars), tuple(ranges), negated), close + 1


def _literal(segment: Sequence[Atom]) -> str | None:
    if all(isinstance(a, str) for a in segment):
        return "".join(a for a in segment if isinstance(a, str))
    return None


def _at(segment: Sequence[Atom], text: str, pos: int) -> bool:
    """Whether ``segment`` matches ``text`` at ``pos`` (the caller checked the length)."""
    for k, atom in enumerate(segment):
        c = text[pos + k]
        if atom is _ANY:
            continue
        if isinstance(atom, str):
            if c != atom:
                return False
        elif not atom.admits(c):
            return False
    return True


class Glob:
    """One compiled pattern."""

    __slots__ = ("_literals", "_segments", "_shape", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._segments = _parse(pattern)
        # A segment of plain characters is found with str's own search.
        self._literals = [_literal(s) for s in self._segments]
        self._shape = self._shape_of()

    def _shape_of(self) -> str:
        """The common patterns, matched with one string operation each."""
        plain = all(lit is not None for lit in self._literals)
        if not plain:
            return ""
        if len(self._segments) == 1:
            return "exact"  # "name"
        if len(self._segments) == 2:
            if not self._segments[0] and not self._segments[1]:
                return "any"  # "*"
            if not self._segments[1]:
                return "prefix"  # "name*"
            if not self._segments[0]:
                return "suffix"  # "*name"
        return ""

    def match(self, text: str) -> bool:
        shape = self._shape
        if shape:
            if shape == "any":
                return True
            head, tail = self._literals[0], self._literals[-1]
            assert head is not None and tail is not None
            if shape == "exact":
                return text == head
            if shape == "prefix":
                return text.startswith(head)
            return text.endswith(tail)
        segments, literals = self._segments, self._literals
        first = segments[0]
        if len(segments) == 1:
            return len(text) == len(first) and self._here(0, text, 0)
        last = segments[-1]
        end = len(text) - len(last)  # where the last segment must begin
        if end < len(first) or not self._here(0, text, 0):
            return False
        if not self._here(len(segments) - 1, text, end):
            return False
        pos = len(first)
        for index in range(1, len(segments) - 1):
            segment = segments[index]
            if not segment:
                continue
            literal = literals[index]
            if literal is not None:
                found = text.find(literal, pos, end)
            else:
                found = self._leftmost(segment, text, pos, end)
            if found < 0:
                return False
            pos = found + len(segment)
        return True

    def _here(self, index: int, text: str, pos: int) -> bool:
        literal = self._literals[index]
        if literal is not None:
            return text.startswith(literal, pos)
        return _at(self._segments[index], text, pos)

    @staticmethod
    def _leftmost(segment: Sequence[Atom], text: str, pos: int, end: int) -> int:
        """The first place at or after ``pos`` where ``segment`` matches and ends by
        ``end``, or -1."""
        for start in range(pos, end - len(segment) + 1):
            if _at(segment, text, start):
                return start
        return -1

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")
