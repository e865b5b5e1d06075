"""mcpd's own ``_meta`` keys, where a server wrote them: dropped.

What mcpd says of a server's answer it says under keys of its own, ``mcpd/...``
(``mcpd/server``, ``mcpd/outage``, ``mcpd/held``). A server that wrote such a key into
what it sends could dress its words up as mcpd's: an outage that is none, another
server's name on its result. So whatever a server put under mcpd's keys is dropped
before an agent sees it: in the ``_meta`` of a result (of ``tools/call``,
``prompts/get``, ``resources/read``, ``completion/complete``, the tasks methods), in
every ``_meta`` of a notification mcpd relays (progress, task status), and in an
error's ``data`` (at its top, where mcpd's own keys go, and in every ``_meta`` in it).

A result is read for its ``_meta`` keys by a decode that skips everything else
(``servers.askback``), as an agent's decoder reads them: a key written with escapes
(``"\\u006dcpd/"``) is the key it decodes to. A notification's params and an error's
data are looked at as bytes first (``may_hold``): a key reads ``mcpd/`` once decoded
when it is written so or with any of those characters escaped, and the scan finds
either (a false alarm, a slash escaped as some encoders do, costs only a decode).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
from msgspec import Raw

OWN: Final = "mcpd/"
_MAY_HOLD: Final = re.compile(rb'"mcpd/|\\u00(?:6[34dD]|70|2[fF])|\\/')
_META: Final = "_meta"


def drop(obj: dict[str, Any]) -> bool:
    """``obj`` (the caller's own) without keys of mcpd's; whether any went."""
    own = [key for key in obj if key.startswith(OWN)]
    for key in own:
        del obj[key]
    return bool(own)


def may_hold(raw: bytes) -> bool:
    """Whether JSON text ``raw`` may hold a key of mcpd's (a false alarm is possible)."""
    return _MAY_HOLD.search(raw) is not None


def drop_from_meta(value: Any) -> bool:
    """Every key of mcpd's taken out of every ``_meta`` object in ``value`` (decoded,
    the caller's own: changed in place), however deep; whether any was. Walked with a
    stack: a deep value is not a deep recursion."""
    dropped = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            meta = item.get(_META)
            if isinstance(meta, dict):
                dropped = drop(meta) or dropped
            stack.extend(item.values())
    return dropped


def meta_dropped(raw: Raw) -> Raw:
    """JSON text ``raw`` as it is, or encoded again without keys of mcpd's in any
    ``_meta`` in it."""
    if not may_hold(raw):
        return raw
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return raw
    return Raw(msgspec.json.encode(value)) if drop_from_meta(value) else raw


def drop_from_data(data: Any) -> bool:
    """An error's ``data`` (decoded, the caller's own) without keys of mcpd's at its top
    or in any ``_meta`` in it; whether any went."""
    dropped = drop(data) if isinstance(data, dict) else False
    return drop_from_meta(data) or dropped
