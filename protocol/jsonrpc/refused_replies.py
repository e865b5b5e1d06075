"""A reply that plainly answers a request but cannot be taken, on whichever transport it
came: one holding both a result and an error, or one under an id of the wrong type
(``"23"`` or ``23.0`` for request 23). Taking it would guess at what the server meant,
and dropping it would leave the request to wait out its time limit for an answer that
already came; so the request it answered fails at once, with the same reason and one
warning everywhere. The server sent it, so it is up and keeps running.

``answered`` tells which waiting request such a reply was for (``waiting`` says whether
one waits under an id; ``misaddressed`` is the part for a reply that is sound but for
its id's type); ``refusal`` is what that request then fails with. One whose id names
no request at all (``names_a_request``) fails none. A reply may name more than one
request: a JSON-RPC batch of responses, or a response that gives its ``"id"`` more than
once (``named_twice``). Each request it names that waits fails (``refuse_each``), and
none it does not name.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Final

from ..shown.logfields import log_extra
from ..shown.visible import ID_SHOWN, cut, quoted_id
from . import messages as rpc
from .reply_faults import MalformedReply, malformed_reason

_DECIMAL: Final = re.compile(r"-?(?:0|[1-9][0-9]{0,18})", re.ASCII)
# The ids of a reply giving its "id" more than once that its sentence shows.
IDS_SHOWN: Final = 4


def spelled_id(given: object) -> int | None:
    """The integer id a response's id of the wrong type spells (23 for ``"23"`` or
    ``23.0``); None for any other value."""
    if isinstance(given, str) and _DECIMAL.fullmatch(given):
        return int(given)
    if isinstance(given, float) and given.is_integer() and abs(given) < 2**63:
        return int(given)
    return None


def answered(
    given: object, why: str, waiting: Callable[[rpc.Id], bool]
) -> tuple[rpc.Id, str] | None:
    """The waiting request a reply under the id ``given`` answered, and why it cannot
    be taken (``why``, or that its id is of the wrong type); None when no request waits
    for it."""
    if not isinstance(given, bool) and isinstance(given, int | str) and waiting(given):
        return given, why
    return misaddressed(given, waiting)


def misaddressed(given: object, waiting: Callable[[rpc.Id], bool]) -> tuple[rpc.Id, str] | None:
    """The waiting request a reply under an id of the wrong type answered, and why it
    cannot be taken: the request under the integer the id spells, when none waits under
    the id as given."""
    rid = spelled_id(given)
    if rid is None or not waiting(rid):
        return None
    kind = "a string" if isinstance(given, str) else "not an integer"
    return rid, f"sent under the id {shown_id(given)} ({kind}) for request {rid}"


def named_twice(line: bytes) -> tuple[tuple[object, ...], str] | None:
    """The ids a response gives when it gives its ``"id"`` more than once (a reader
    keeps one of them, msgspec the last, another reader the first), and why it cannot
    be taken; None when it gives one. ``line``: the response as written, read again
    here only when no request took it."""
    if line.count(b'"id"') < 2:
        return None
    try:
        members = json.loads(line, object_pairs_hook=list)
    except (ValueError, RecursionError):
        return None
    if not isinstance(members, list):
        return None
    ids = tuple(value for key, value in members if key == "id")
    if len(ids) < 2:
        return None
    # The sentence reaches the agent and the journal: a few ids show what was sent.
    shown = ", ".join(map(shown_id, ids[:IDS_SHOWN]))
    more = f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else ""
    return ids, f'sent with more than one "id" ({shown}{more})'


def refuse_each(given: tuple[object, ...], why: str, refuse: Callable[[object, str], bool]) -> bool:
    """Fail at once each waiting request a reply that cannot be taken names (``given``:
    the ids it was sent under; ``refuse`` fails the one under an id, if it waits, as
    ``answered`` tells); whether one did. Each is tried, whatever came of those before."""
    failed = [rid for rid in given if refuse(rid, why)]
    return bool(failed)


def names_a_request(given: object) -> bool:
    """Whether a response's id names a request at all, as written or as the integer it
    spells (``true``, ``1.5`` and null name none)."""
    return rpc.valid_id(given) or spelled_id(given) is not None


def shown_id(given: object) -> str:
    """A response's id as a sentence shows it, whatever its type."""
    return quoted_id(given) if isinstance(given, str) else cut(repr(given), ID_SHOWN)


def refusal(label: str, rid: rpc.Id, why: str, logger: logging.Logger) -> MalformedReply:
    """What the request ``rid`` fails with, its reply from ``label`` being ``why``; the
    warning that says so is logged here, once."""
    reason = malformed_reason(label, why)
    logger.warning(
        "%s; the request (id %r) it answered failed, the server keeps running",
        reason,
        rid,
        extra=log_extra(label, "malformed_reply", reason),
    )
    return MalformedReply(reason)
