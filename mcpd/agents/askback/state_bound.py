"""How large a server's ``requestState`` a modern agent may be handed: its retry must
bring it back, beside what it repeats of the request, on whichever route it takes.

A retry too large for the route ends the request at the agent's side, or worse: on the
socket, mcpd closes a connection that sends a line over ``max_line_bytes``, and the
agent's other requests end with it. So a state the agent could not send back ends its
request at mcpd instead, with an error naming the server and both sizes, and the
journal names the server (``state_too_large``)."""

from __future__ import annotations

import logging
import secrets
from typing import Final

import msgspec
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra

from ..http.body_size import MAX_BODY

logger = logging.getLogger("mcpd.askback")

# A token of mcpd's for a round of a tools/call (``resumes``): this prefix, a nonce of
# this many random bytes, a dot and the server's state.
PREFIX: Final = "mcpd-round:"
NONCE_BYTES: Final = 18
_TOKEN_HEAD: Final = len(PREFIX) + len(secrets.token_urlsafe(NONCE_BYTES)) + 1


def largest_state(max_line_bytes: int, repeated: int = 0) -> int:
    """The largest ``requestState`` of a server's (its JSON's bytes) an agent is handed
    to send back, while the daemon reads lines of ``max_line_bytes``, in a retry that
    repeats ``repeated`` bytes of the request it continues (the name it called and the
    arguments it gave, which the retry must bring again). Of the smallest request any
    route of an agent's reads whole (a line on the socket, which ``mcpd bridge`` relays
    as it is, and an HTTP body), half is left for what only the retry brings (the
    answers, its ``_meta`` and the envelope); the other half holds the request repeated
    and the state, carried in a token of mcpd's or as the server wrote it."""
    room = min(max_line_bytes, MAX_BODY) // 2 - _TOKEN_HEAD - repeated
    return max(room, 0) // 4 * 3  # base64 writes each 3 bytes as 4 characters


def repeated_bytes(name: str, given: Raw | UnsetType) -> int:
    """What a retry repeats of the request it continues: the name it called (as JSON
    writes it) and the arguments it gave, as they were written."""
    return len(msgspec.json.encode(name)) + (len(given) if isinstance(given, Raw) else 0)


def why_unsendable(alias: str, state: Raw | UnsetType, largest: int) -> str | None:
    """Why ``state``, ``alias``'s ``requestState``, cannot be handed to an agent whose
    retry could bring back at most ``largest`` bytes of it, told to the journal; None
    when it can."""
    if not isinstance(state, Raw) or len(state) <= largest:
        return None
    why = (
        f"its requestState of {len(state):,} bytes is over the {largest:,} bytes mcpd "
        "hands an agent to send back with this request"
    )
    logger.warning(
        "%s: answered input_required, and %s; the request ended",
        alias,
        why,
        extra=log_extra(alias, "state_too_large", why),
    )
    return why


def refuse_too_large(alias: str, state: Raw | UnsetType, largest: int) -> None:
    """Raises the error a prompts/get or resources/read gets for ``alias``'s
    ``input_required`` with a ``state`` its retry could not bring back (``why_unsendable``).
    Their results have no ``isError`` to say so in, so it is an error reply."""
    why = why_unsendable(alias, state, largest)
    if why is not None:
        raise rpc.RPCError(
            rpc.INTERNAL_ERROR,
            f"the server {alias!r} asked for more input, but {why}, so this request cannot "
            "go on; sending it again may get a smaller one",
            {"server": alias, "largestState": largest},
        )
