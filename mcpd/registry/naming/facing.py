"""What agents know a server's item by, among that server's items: one name for two
of the server's names when agents cannot tell them apart.

A server names its own items, and agents get each tool or prompt under a local name
made from that name (renamed by the operator's rules, then every character outside
``[A-Za-z0-9_-]`` made ``_``: ``registry.naming.spelling``), and read, through a template, any
URI it matches. So ``send.mail`` reaches agents as ``send_mail`` did. An item a
server lists under a new name that agents know as an item pinned under another is
judged as a change of that item (``Namesakes``), not as a new one: else a server
could change an approved item by renaming it, and agents would get the new text under
the name they trusted.

A template is its namesake's when the two may read a URI in common: ``notes://{+id}``,
``notes://{id}{;v}``, ``NOTES://{id}`` each read what ``notes://{id}`` read, and
spellings that do so are without end. Whether two may share a URI is answered from
their literal prefixes, as routing answers it first (``claims``), each read as a server
reads a URI (``uri_templates.reach``: ``file://localhost/data/{+p}`` reads what
``file:///data/{+p}`` does): when neither begins the other, no URI is read by both.
So a server's new template beside an approved one of a prefix it shares
(``notes://{id}/history`` beside ``notes://{id}``) is judged as a change of that one,
and a person approves it once.

A pin forgotten leaves marks (``forgotten``): a tool's or a prompt's of the name agents
know it by, a template's of what it may read (``marks``), so that an item that would
have been judged as a change of the pin is judged as a change of a pin whose
definition is lost (``looked_up``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from typing import Final

from protocol.mcp import uri_templates

from ..pinning.definitions import Kind

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
# A forgotten template's marks: its reach cut short at each of a few lengths, and
# apart from those, the longest of them (``marks``).
_CUT: Final = "{<}"
_LONGEST_CUT: Final = "{=}"


def sanitize(name: str) -> str:
    return _UNSAFE.sub("_", name)


def spellings(name: str) -> tuple[str, ...]:
    """The server's name for an item, and what agents know it by when that differs: a
    pattern that names the item holds by either, so that a server renaming it to a
    look-alike (``rm_rf`` to ``rm.rf``) does not take it out of a rule."""
    known = sanitize(name)
    return (name,) if known == name else (name, known)


def facing(kind: Kind, name: str, renames: Mapping[str, str]) -> str:
    """What agents know the item the server calls ``name`` by, within its server."""
    if kind == "template":
        return uri_templates.path_shape(name)
    return sanitize(renames.get(name, name))


def marks(kind: Kind, name: str, renames: Mapping[str, str]) -> list[str]:
    """What the pin of the item the server calls ``name`` is marked by once forgotten.

    Two templates may share a URI when one's reach begins the other's (``Namesakes``),
    and a mark is found only by what it is of, never by what that begins. So a
    template is marked by its reach cut at no character and at each power of two up to
    its length, and, tagged apart, by the longest of those cuts. A template whose reach
    begins a forgotten one's looks up its own longest cut, which is among the forgotten
    one's cuts; one whose reach a forgotten one's begins looks up each of its own cuts,
    among which is the forgotten one's longest (``looked_up``). A few marks and
    look-ups do, however long the reach, and no template that may share a URI with a
    forgotten one misses its marks; one whose reach agrees with a forgotten one's only
    as far as the shorter one's longest cut (``notes://b/{x}`` after
    ``notes://archive/{x}``) finds them too, on the side of holding."""
    if kind != "template":
        return [facing(kind, name, renames)]
    reach = uri_templates.reach(name)
    cuts = _cuts(len(reach))
    return [_CUT + reach[:at] for at in cuts] + [_LONGEST_CUT + reach[: cuts[-1]]]


def looked_up(kind: Kind, name: str, renames: Mapping[str, str]) -> list[str]:
    """The marks any of which, set, says that a pin the item the server calls ``name``
    would be judged against may have been forgotten (``marks``)."""
    if kind != "template":
        return [facing(kind, name, renames)]
    reach = uri_templates.reach(name)
    cuts = _cuts(len(reach))
    return [_CUT + reach[: cuts[-1]]] + [_LONGEST_CUT + reach[:at] for at in cuts]


def _cuts(length: int) -> list[int]:
    """No character, then each power of two up to ``length``."""
    return [0, *(1 << n for n in range(length.bit_length()))]


class Namesakes:
    """One list's pins by what agents know each item by."""

    __slots__ = ("_by_facing", "_kind", "_names", "_reaches", "_renames", "_widest")

    def __init__(self, kind: Kind, pinned: Iterable[str], renames: Mapping[str, str]) -> None:
        self._kind = kind
        self._renames = renames
        # Of several pins agents know alike, the one pinned last.
        self._by_facing = {facing(kind, name, renames): name for name in pinned}
        # Of templates: the pins' reaches, sorted, each entry's name, and the widest
        # entry whose reach begins its own (``_widest``).
        entries = sorted((uri_templates.reach(n), n) for n in pinned) if kind == "template" else []
        self._reaches = [reach for reach, _ in entries]
        self._names = [name for _, name in entries]
        self._widest = _widest(entries)

    def of(self, name: str) -> str | None:
        """The name of a pin agents know as they would know ``name`` (which has none
        of its own), if there is one; of a template, else of the widest pinned one
        that may read a URI it reads."""
        found = self._by_facing.get(facing(self._kind, name, self._renames))
        if found is not None or not self._reaches:
            return found
        reach = uri_templates.reach(name)
        # In sorted order, the reaches between one that begins ``reach`` and
        # ``reach`` itself all begin with it: the widest of the entry just before
        # begins ``reach`` if any pinned reach does.
        at = bisect.bisect_right(self._reaches, reach)
        if at > 0:
            widest_reach, widest = self._widest[at - 1]
            if reach.startswith(widest_reach):
                return widest
        # Else the first that ``reach`` begins, if any.
        at = bisect.bisect_left(self._reaches, reach)
        if at < len(self._reaches) and self._reaches[at].startswith(reach):
            return self._names[at]
        return None


def _widest(entries: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Per sorted (reach, name) entry, the first entry whose reach begins its own
    (itself, when none before it does)."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, str]] = []  # the entries that begin the current one
    for entry in entries:
        while stack and not entry[0].startswith(stack[-1][0]):
            stack.pop()
        out.append(stack[0] if stack else entry)
        stack.append(entry)
    return out
