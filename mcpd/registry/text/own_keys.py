"""mcpd's own ``_meta`` keys, where a server wrote them: dropped.

What mcpd says of a server's answer it says under keys of its own, ``mcpd/...``
(``mcpd/server``, ``mcpd/outage``, ``mcpd/held``). A server that wrote such a key into
what it sends could dress its words up as mcpd's: an outage that is none, another
server's name on its result. So whatever a server put under mcpd's keys is dropped
before an agent sees it: in the ``_meta`` of a result (of ``tools/call``,
``prompts/get``, ``resources/read``, ``completion/complete``, the tasks methods), in
every ``_meta`` of a notification mcpd relays (progress, task status), and in an
error's ``data`` (at its top, where mcpd's own keys go, and in every ``_meta`` in it).

A result, a notification's params and an error's data are looked at as bytes first
(``may_hold``): a key reads ``mcpd/`` once decoded when its opening quote is followed
by those five characters, each written as it is or escaped (``"\\u006dcpd\\/"``), and
the scan finds every such spelling (a false alarm, a string value that starts so, costs
only a decode). What may hold one is decoded whole and encoded again, even when no key
of mcpd's is left in the decoded value: JSON text can give one key twice, mcpd reads
the last and a reader that keeps the first would see what the server wrote there, so
such text never goes on as the server's bytes.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec
from msgspec import Raw

from .relayed import every_object

OWN: Final = "mcpd/"
# A quote, then "mcpd/" with each character as it is or escaped. The quote opens a
# string unless a backslash is before it (an opening one never follows one): that is
# checked for each match rather than in the pattern, since a pattern that begins with a
# literal quote is scanned for it at the speed of a byte search, and one that begins
# with a look behind is tried at every byte.
_MAY_HOLD: Final = re.compile(
    rb'"(?:m|\\u006[dD])(?:c|\\u0063)(?:p|\\u0070)(?:d|\\u0064)(?:/|\\/|\\u002[fF])'
)
_BACKSLASH: Final = 0x5C
_META: Final = "_meta"


def drop(obj: dict[str, object]) -> bool:
    """``obj`` (the caller's own) without keys of mcpd's; whether any went."""
    own = [key for key in obj if key.startswith(OWN)]
    for key in own:
        del obj[key]
    return bool(own)


def may_hold(raw: bytes | Raw) -> bool:
    """Whether JSON text ``raw`` may hold a key of mcpd's (a false alarm is possible).
    Run on every result a server sends: one scan of its bytes."""
    for found in _MAY_HOLD.finditer(raw):
        at = found.start()
        if at == 0 or memoryview(raw)[at - 1] != _BACKSLASH:
            return True
    return False


def drop_from_meta(value: object) -> bool:
    """Every key of mcpd's taken out of every ``_meta`` object in ``value`` (decoded,
    the caller's own: changed in place), however deep; whether any was."""
    dropped = False
    for item in every_object(value):
        meta = item.get(_META)
        if isinstance(meta, dict):
            dropped = drop(meta) or dropped
    return dropped


def meta_dropped(raw: Raw) -> Raw:
    """JSON text ``raw`` as it is, or (when it may hold a key of mcpd's) decoded and
    encoded again without keys of mcpd's in any ``_meta`` in it."""
    if not may_hold(raw):
        return raw
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # Not reached: a transport hands over only JSON it could decode.
        return Raw(b"{}")
    drop_from_meta(value)
    return reencoded(raw, value)


def reencoded(raw: Raw, value: object) -> Raw:
    """``value`` (decoded from ``raw``) as JSON text: ``raw`` itself when that is what
    it encodes to, which a key given twice, or escaped, never is."""
    encoded = msgspec.json.encode(value)
    return raw if memoryview(raw) == encoded else Raw(encoded)


def drop_from_data(data: object) -> bool:
    """An error's ``data`` (decoded, the caller's own) without keys of mcpd's at its top
    or in any ``_meta`` in it; whether any went."""
    dropped = drop(data) if isinstance(data, dict) else False
    return drop_from_meta(data) or dropped
