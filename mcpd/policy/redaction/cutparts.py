"""The beginning of a secret where mcpd cut a server's words short.

mcpd cuts a long text of a server's and notes the cut (``visible.CUT_NOTE``). A server
that pads what it echoes can put the cut inside a secret, and what comes before the
note would show all of the secret but its last characters. ``CutParts`` finds, before
each note, the longest beginning of a secret that the text ends with there.

A server writes the text, notes that read as mcpd's included, and may know a secret
(its own OAuth token): the look is linear in the text and in each secret. A C-speed
search for the secret's first characters, then, only where they occur, one pass of
the Knuth-Morris-Pratt automaton from there to the note; each note's look goes back
no further than the secret's length or the note before it (no secret holds a note),
and only a text's last ``CUT_NOTES`` notes are looked at.
"""

from __future__ import annotations

import re
from array import array
from typing import Final

from protocol.shown.visible import CUT_NOTE

# ``CUT_MARK`` is in every note: text without it is not searched for one. ``CUT_PART``:
# the fewest characters of a secret before a note that are taken for its beginning
# (fewer could be any text's end).
CUT_MARK: Final = " (and "
CUT_PART: Final = 4
# A note as it reads in JSON mcpd wrote, whatever the escapes of what came before it.
WRITTEN_NOTE: Final = re.compile(rb" \(and (?:over )?\d+ more (?:characters|bytes)\)")
# The notes looked at in one text, its last ones: a text of mcpd's quotes a few of a
# server's words, and each note costs a look back as long as the longest secret.
CUT_NOTES: Final = 16


def border_table(value: str) -> array[int]:
    """For each beginning of ``value``, the length of its longest proper beginning
    that is also its end (the failure table of Knuth, Morris and Pratt)."""
    table = array("l", [0]) * len(value)
    size = 0
    for at in range(1, len(value)):
        while size and value[at] != value[size]:
            size = table[size - 1]
        if value[at] == value[size]:
            size += 1
        table[at] = size
    return table


def overlap(value: str, borders: array[int], text: str, begin: int, end: int) -> int:
    """The length of the longest beginning of ``value``, shorter than all of it, that
    ``text[begin:end]`` ends with; each character of the text is read once."""
    size = 0
    whole = len(value)
    for char in text[begin:end]:
        while size and (size == whole or value[size] != char):
            size = borders[size - 1]
        if value[size] == char:
            size += 1
    return borders[size - 1] if size == whole else size


class CutParts:
    """The secrets, each as written in a text (``written``: the form -> whose it is),
    looked for where a note of a cut follows their beginning."""

    __slots__ = ("_tables", "written")

    def __init__(self, written: dict[str, str]) -> None:
        self.written = written
        # Each form's ``border_table``, made the first time a note follows its first
        # characters.
        self._tables: dict[str, array[int]] = {}

    def parts(self, text: str) -> list[tuple[int, int, str]]:
        """Each beginning of a secret that a note of a cut follows in ``text``: where it
        starts and ends, and whose secret it is."""
        if not self.written or CUT_MARK not in text:
            return []
        notes = [(cut.start(), cut.end()) for cut in CUT_NOTE.finditer(text)][-CUT_NOTES:]
        found: list[tuple[int, int, str]] = []
        after = 0
        for start, end in notes:
            part = self._before(text, after, start)
            if part is not None:
                found.append((start - part[0], start, part[1]))
            after = end
        return found

    def _before(self, text: str, start: int, end: int) -> tuple[int, str] | None:
        # The longest beginning of a form that text[start:end] ends with: its length
        # and owner.
        best: tuple[int, str] | None = None
        for value, owner in self.written.items():
            size = len(value) - 1
            if size < CUT_PART or (best is not None and size <= best[0]):
                continue
            begin = text.find(value[:CUT_PART], max(start, end - size), end)
            if begin < 0:
                continue
            borders = self._tables.get(value)
            if borders is None:
                borders = self._tables[value] = border_table(value)
            length = overlap(value, borders, text, begin, end)
            if length >= CUT_PART and (best is None or length > best[0]):
                best = (length, owner)
        return best
