"""What a ``requestState`` of mcpd's binds of the call it continues: its arguments, so
that a retry continues that call only when it brings the same ones (``other_arguments``),
whichever of mcpd's states it carries (an approval's, a legacy server's question, a
2026-07-28 server's round). A retry is the call it continues sent again with the
answers; one that brings other arguments is another call, and taken for that one it
would get a result of arguments it did not send."""

from __future__ import annotations

import hashlib
from typing import Final

from msgspec import Raw, UnsetType

from ...policy.decision.gate import READ_HERE
from ...policy.shown.reading import Unshowable, read_arguments
from ...policy.shown.showing import canonical_json

# A call sent with no arguments, and how ``null`` and ``{}`` for them are shown: every
# server reads the three alike (``arguments`` is optional, and a reader that takes
# ``null`` takes it for none given).
_NONE: Final = b"none"
_NONE_SHOWN: Final = frozenset({"null", "{}"})


def binding(arguments: Raw | UnsetType) -> tuple[bytes, str | None]:
    """What a token binds of a round's ``arguments`` (a digest), and why a person could
    not be shown them as the server will read them (None: they could, or they are not
    read here).

    A retry may write them otherwise than the round it continues did, as an SDK that
    decoded them and encodes them again does: other spacing, the members in another
    order, a character escaped or not. Every reader reads those alike once no key is
    given twice and no number is in doubt, so arguments that can be shown are bound
    as they are shown (``showing.canonical_json``). A number is bound as it is written:
    readers differ on ``1.5`` and ``1.50`` (a decimal reader keeps the digits) or on
    ``100`` and ``100.0`` (an integer or not), and an SDK writes one value the same
    way each time. Arguments that cannot be shown read one way to one reader and
    another way to the next: bound byte for byte, they pass only as the very bytes the
    server was sent. So do arguments past ``READ_HERE``, which a call's reply would
    otherwise wait for while they were read. None given, ``null`` and ``{}`` bind
    alike: an SDK may fill in ``{}`` when it encodes the retry of a call that sent
    none, and the server is sent what the retry brings."""
    if not isinstance(arguments, Raw):
        return _NONE, None
    written = bytes(arguments)
    if len(written) > READ_HERE:
        return _digest(b"written", written), None
    try:
        reading = read_arguments(written)
        reading.check()
    except Unshowable as exc:
        return _digest(b"written", written), str(exc)
    shown = canonical_json(reading)
    if shown in _NONE_SHOWN:
        return _NONE, None
    return _digest(b"shown", shown.encode()), None


def other_arguments(kept: bytes, arguments: Raw | UnsetType) -> str | None:
    """How a retry bringing ``arguments`` differs from the call whose arguments bound
    to ``kept``, in the words of mcpd's refusal; None when it brings the same."""
    given, unshowable = binding(arguments)
    if given == kept:
        return None
    if unshowable is not None:
        return (
            "a call with other arguments: these cannot be shown as the server will read "
            f"them ({unshowable})"
        )
    return "a call with other arguments"


def _digest(kind: bytes, data: bytes) -> bytes:
    return hashlib.sha256(kind + b"\0" + data).digest()
