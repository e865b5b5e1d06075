"""How deep a JSON text nests, told from its bytes without decoding it.

Python's JSON decoders go as deep as the interpreter's recursion limit lets them from
where they are called, so one text may decode from a shallow call and fail from a deeper
one. A reading that must come out the same wherever it is made checks the text against
``MAX_DEPTH`` first: a bound of its own, far enough under that limit that any decoder
mcpd calls, from any depth it calls one at, reads whatever the bound lets through.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Final

# Arrays and objects within each other, the outermost counted.
MAX_DEPTH: Final = 512

# A JSON string, or one that never ends (the rest of the text): it matches wherever a
# quote starts one, so no quote inside a string is ever tried as another's start, which
# would make a scan's time grow with the square of an unended string's length.
STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_NOT_BRACKET: Final = bytes(c for c in range(256) if c not in b"{}[]")
_STEP: Final = bytes.maketrans(b"{[}]", b"\x02\x02\x00\x00")


def bracket_steps(skeleton: bytes) -> bytes:
    """The brackets of ``skeleton`` (a text with its strings taken out, by ``STRING``),
    each as a step in depth plus one: an opening one 2, a closing one 0."""
    return skeleton.translate(_STEP, _NOT_BRACKET)


def deeper_than(text: bytes, most: int = MAX_DEPTH) -> bool:
    """Whether ``text`` nests arrays and objects more than ``most`` deep outside its
    strings (a string that never ends ends the text: a decoder stops there). Done with
    byte operations and C-level loops, in time that grows with the text's length
    alone."""
    if text.count(b"[") + text.count(b"{") <= most:
        return False  # too few brackets to be so deep, in strings or out of them
    steps = bracket_steps(STRING.sub(b"", text))
    depths = map(operator.sub, itertools.accumulate(steps), itertools.count(1))
    return max(depths, default=0) > most
