"""A held definition change as the page shows it: a unified diff of the definition as
approved and as offered now, of a size the page can carry whatever a server lists.

Both definitions are laid out from their canonical JSON (keys sorted, two spaces a
level), and only a window of them is diffed: from a few lines before the first line
they differ in, at most ``WINDOW`` lines of each. Of a line longer than ``LINE``
characters, the part around where it first differs from the line it replaces is
shown, so that a change deep in a long description is seen. Each character a person
could not see is written out (``\\u200b``), since hidden text is what a held change is
most often about. A diff that leaves something out says so (``HeldDiff.cut``):
``mcpd approve`` shows the whole change.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Sequence
from typing import Final

import msgspec

from protocol.shown.visible import written_out

WINDOW: Final = 40  # lines of each definition
LINE: Final = 160  # characters of a line, its characters written out counted as shown
CONTEXT: Final = 3  # unchanged lines shown around a change
_LEAD: Final = LINE // 4  # of a changed line, what is shown before where it differs
_MORE: Final = "\u2026"


class HeldDiff(msgspec.Struct, frozen=True):
    text: str  # unified-diff lines
    cut: bool  # lines, or parts of lines, were left out


def held_diff(approved: bytes | None, offered: bytes, approved_label: str) -> HeldDiff:
    """The diff of two canonical JSON definitions; ``approved`` None: none is known,
    and ``approved_label`` says why."""
    before, after = _layout(approved), _layout(offered)
    head = _same_lead(before, after)
    start = max(0, head - CONTEXT)
    trail = _same_trail(before, after, min(len(before), len(after)) - head)
    ends = [min(len(lines), len(lines) - trail + CONTEXT) for lines in (before, after)]
    cut = any(end - start > WINDOW for end in ends)
    old = before[start : min(ends[0], start + WINDOW)]
    new = after[start : min(ends[1], start + WINDOW)]
    out: list[str] = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(
        CONTEXT
    ):
        if not out:
            out += [f"--- {approved_label}", "+++ offered now"]
        first, last = group[0], group[-1]
        out.append(
            f"@@ -{_span(start + first[1], last[2] - first[1])} "
            f"+{_span(start + first[3], last[4] - first[3])} @@"
        )
        for tag, i1, i2, j1, j2 in group:
            removed, added = old[i1:i2], new[j1:j2]
            if tag == "equal":
                cut = _put(out, " ", removed, [0] * len(removed)) or cut
                continue
            # A changed line is shown from near where it differs from the one it replaces.
            leads = [_lead(a, b) for a, b in zip(removed, added, strict=False)]
            cut = _put(out, "-", removed, leads) or cut
            cut = _put(out, "+", added, leads) or cut
    return HeldDiff("\n".join(out), cut)


def _layout(definition: bytes | None) -> list[str]:
    if definition is None:
        return []
    return msgspec.json.format(definition, indent=2).decode().split("\n")


def _same_lead(a: Sequence[object], b: Sequence[object]) -> int:
    """How many items ``a`` and ``b`` begin with alike, found by halving: each compare
    is one of two slices, so a long definition costs no step a line or a character."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _same_trail(a: list[str], b: list[str], most: int) -> int:
    """How many lines, at most ``most``, ``a`` and ``b`` end with alike."""
    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def _span(start: int, count: int) -> str:
    """A hunk's range as unified diffs write it: lines from 1, and an empty range
    named by the line before it."""
    if count == 1:
        return str(start + 1)
    return f"{start + 1 if count else start},{count}"


def _lead(a: str, b: str) -> int:
    if max(len(a), len(b)) <= LINE:
        return 0
    return max(0, _same_lead(a, b) - _LEAD)


def _put(out: list[str], sign: str, lines: list[str], leads: list[int]) -> bool:
    cut = False
    for i, line in enumerate(lines):
        shown, was_cut = _part(line, leads[i] if i < len(leads) else 0)
        out.append(sign + shown)
        cut = cut or was_cut
    return cut


def _part(line: str, begin: int) -> tuple[str, bool]:
    """At most ``LINE`` characters of ``line`` from ``begin``, as shown: after the
    name of the member the line is of, where ``begin`` leaves it out."""
    if begin == 0 and len(line) <= LINE and line.isprintable():
        return line, False
    name = _member(line)
    if begin <= len(name):
        begin = 0
    shown, used = _written(line[begin : begin + LINE], LINE)
    more = begin + used < len(line)
    lead = _written(name, _LEAD)[0] + _MORE if begin else ""
    return lead + shown + (_MORE if more else ""), bool(begin) or more


def _member(line: str) -> str:
    """A line's indent and ``"name": ``, where the name is short."""
    end = line.find('": ', 0, _LEAD)
    return line[: end + 3] if end > 0 and line.lstrip(" ").startswith('"') else ""


def _written(text: str, room: int) -> tuple[str, int]:
    """The start of ``text`` that fits in ``room`` characters with every character a
    person could not see written out, and how many characters of ``text`` it is."""
    if text.isprintable():  # no control, format or space character but " "
        return text[:room], min(room, len(text))
    out: list[str] = []
    used = 0
    for n, ch in enumerate(text):
        piece = ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else written_out(ch)
        if used + len(piece) > room:
            return "".join(out), n
        out.append(piece)
        used += len(piece)
    return "".join(out), len(text)
