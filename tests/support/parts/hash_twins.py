"""Two tool names whose hashed local names agree in their first six hex digits.

An attacker finds one against a fixed name with about 2**24 SHA-1 tries offline; a test
lets both names vary instead, which finds a pair in a few thousand tries each."""

from __future__ import annotations

import hashlib
from collections.abc import Callable


def short_hash(alias: str, name: str, digits: int = 6) -> str:
    return hashlib.sha1(f"{alias}::{name}".encode()).hexdigest()[:digits]


def agreeing_names(first: str, second: str, name: Callable[[str, int], str]) -> tuple[str, str]:
    """A name for alias ``first`` and one for ``second`` (``name(alias, i)`` for some
    ``i`` each) whose six-digit hashes are the same."""
    seen: dict[str, dict[str, str]] = {first: {}, second: {}}
    for i in range(1 << 20):
        for alias, other in ((first, second), (second, first)):
            candidate = name(alias, i)
            digest = short_hash(alias, candidate)
            match = seen[other].get(digest)
            if match is not None:
                return (candidate, match) if alias == first else (match, candidate)
            seen[alias][digest] = candidate
    raise AssertionError("no pair of names found")
