"""A call's arguments as a person is shown them, written from one reading
(``reading``): whole, or at a glance.

At a glance (the list of ``mcpd approvals``, the host's form, the status page), no
part of the arguments is out of sight without the person knowing: every key is shown,
at every depth, and what is too long is shortened where it stands, with how much was
left out: a long string keeps its start (``"Small wording fix. …"…(8620 more
characters)``), a long array its first items and every item that holds a key. Only
where even the keys do not fit is the glance cut short, saying how many keys it
leaves out; a call is not approved from such a glance (``waiting.asking``, the page), but from
``mcpd approvals show``, which writes them whole.

Whole, they are JSON: each object's members in the order sent, each number as it was
written, mcpd's secrets masked. In one form (``canonical_json``), the same for each writing
of them that every reader reads alike: what a call continued over rounds is bound to.
"""

from __future__ import annotations

import contextlib
import json
from typing import Final

import msgspec

from ..redaction.masking import SecretSet
from .reading import Members, Number, Reading, Scalar, Value, read_arguments

# The most characters of the arguments a glance holds, notes of what is left out and
# all (the words around them are the view's).
GLANCE: Final = 2000
# How a glance shortens, most gently first: strings to so many characters, runs of
# array items that hold no key to so many items (None: not at all).
_STEPS: Final = ((None, None), (1000, 100), (300, 30), (100, 10), (30, 3))
_encode: Final = msgspec.json.Encoder().encode


class Glance(msgspec.Struct, frozen=True):
    """The arguments at a glance."""

    text: str
    shortened: bool = False  # some value is shortened where it stands
    keys_left_out: int = 0  # keys there was no room for: not enough to approve from


class _Full(Exception):
    pass


class _Out:
    __slots__ = ("cut", "keys", "parts", "room", "size")

    def __init__(self, room: int | None = None) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.room = room
        self.keys = 0  # written
        self.cut = False  # a value was shortened

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.room is not None and self.size > self.room:
            raise _Full

    def text(self) -> str:
        return "".join(self.parts)


def whole_json(reading: Reading, indent: bool = False) -> str:
    """The whole of what was read as JSON text, compact, or with each member and item
    on a line of its own (``indent``)."""
    out = _Out()
    _write(reading, out, None, None, indent)
    return out.text()


def glance(reading: Reading, limit: int = GLANCE) -> Glance:
    """What was read, in at most about ``limit`` characters, every key shown where
    they fit."""
    for chars, items in _STEPS:
        out = _Out(limit)
        try:
            _write(reading, out, chars, items, False)
        except _Full:
            continue
        return Glance(out.text(), out.cut)
    out = _Out(limit)
    with contextlib.suppress(_Full):
        _write(reading, out, *_STEPS[-1][:2], False)
    left = reading.keys - out.keys
    rest = f"{left} more keys and their values" if left else "the rest"
    return Glance(f"{out.text()[:limit]}…({rest} left out)", True, left)


def canonical_json(reading: Reading) -> str:
    """What was read as JSON text that any writing of the same arguments every reader
    reads alike gives too (``reading`` checked: no key given twice, no number in
    doubt): compact, each object's members ordered by key, each string written one
    way, each number as it was written. Reorders the members of ``reading``."""
    stack: list[Members | list[Value]] = [reading.value] if isinstance(reading.value, list) else []
    while stack:
        container = stack.pop()
        if isinstance(container, Members):
            container.sort(key=_by_key)
            stack.extend(value for _, value in container if isinstance(value, list))
        else:
            stack.extend(item for item in container if isinstance(item, list))
    return whole_json(reading)


def _by_key(member: tuple[str, Value]) -> str:
    return member[0]


class _Frame:
    """An open container, and the index of its next member or item."""

    __slots__ = ("container", "next")

    def __init__(self, container: Members | list[Value]) -> None:
        self.container = container
        self.next = 0


def _write(reading: Reading, out: _Out, chars: int | None, items: int | None, indent: bool) -> None:
    keyed = reading.keyed
    frames: list[_Frame] = []
    node: Value = reading.value
    while True:
        if isinstance(node, list):
            opens, closes = ("{", "}") if isinstance(node, Members) else ("[", "]")
            if node:
                out.add(opens)
                frames.append(_Frame(node))
            else:
                out.add(opens + closes)
        else:
            out.add(_scalar(node, chars, out))
        while frames:
            frame = frames[-1]
            container, n = frame.container, frame.next
            if n == len(container):
                frames.pop()
                close = "}" if isinstance(container, Members) else "]"
                out.add(f"\n{'  ' * len(frames)}{close}" if indent else close)
                continue
            lead = "," if n else ""
            if indent:
                lead += "\n" + "  " * len(frames)
            if isinstance(container, Members):
                key, node = container[n]
                out.add(f"{lead}{_string(key)}{': ' if indent else ':'}")
                out.keys += 1
                frame.next = n + 1
                break
            if items is not None and n >= items:
                run = _keyless_run(container, n, keyed)
                if run:
                    out.cut = True
                    out.add(f"{lead}…({run} more items)")
                    frame.next = n + run
                    continue
            node = container[n]
            out.add(lead)
            frame.next = n + 1
            break
        else:
            return


def _keyless_run(items: list[Value], start: int, keyed: set[int]) -> int:
    """How many items from ``start`` on hold no key."""
    end = start
    while end < len(items):
        item = items[end]
        if isinstance(item, Members) or (isinstance(item, list) and id(item) in keyed):
            break
        end += 1
    return end - start


def _scalar(value: Scalar, chars: int | None, out: _Out) -> str:
    if isinstance(value, Number):
        return str(value)
    if isinstance(value, str):
        if chars is not None and len(value) > chars:
            out.cut = True
            return f"{_string(value[:chars])}…({len(value) - chars} more characters)"
        return _string(value)
    return _encode(value).decode()  # true, false, null


def _string(text: str) -> str:
    try:
        return _encode(text).decode()
    except UnicodeEncodeError:  # half of a UTF-16 pair, written as the escape it came as
        return json.dumps(text)


class ShownArguments:
    """A call's arguments as a person is shown them: at a glance, and whole when asked
    for (written again from the same bytes and secrets, so the same every time)."""

    __slots__ = ("_raw", "_secrets", "glance")

    def __init__(self, raw: bytes | msgspec.Raw, secrets: SecretSet | None, seen: Glance) -> None:
        self._raw = raw
        self._secrets = secrets
        self.glance = seen

    def whole(self) -> str:
        return whole_json(read_arguments(self._raw, self._secrets), indent=True)


def shown_arguments(
    raw: bytes | msgspec.Raw | None, secrets: SecretSet | None = None
) -> ShownArguments:
    """The arguments ``raw`` (none: an empty object), ``secrets`` masked. Raises
    ``RepeatedKey`` or ``Unshowable`` when they cannot be shown as the server will
    read them."""
    raw = raw or b"{}"
    reading = read_arguments(raw, secrets)
    reading.check()
    return ShownArguments(raw, secrets, glance(reading))
