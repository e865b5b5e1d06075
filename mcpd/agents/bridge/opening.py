"""What ``mcpd bridge`` asks each new daemon connection before it relays anything of
the host's: the longest line the daemon reads on it (``mcpd/lineLimit``), and with
``--profile NAME`` that profile (``mcpd/useProfile``).

The daemon closes a connection that sends a line over its limit, every request still
on it unanswered: knowing the limit, the bridge answers such a line of the host's
under its own id instead, and the host's other calls go on. A daemon that does not
know ``mcpd/lineLimit`` is held to the bridge's own bound on a host's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec
import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import DEFAULT_MAX_LINE, LineFramer, Oversized
from protocol.mcp import core as mcp

LIMIT_ID: Final = "mcpd-bridge-line-limit"
PROFILE_ID: Final = "mcpd-bridge-profile"
_WAIT: Final = 10.0
_INFO: Final = mcp.Implementation(name="mcpd-bridge", version="0")


class _Limit(msgspec.Struct):
    maxLineBytes: int


class Opened(msgspec.Struct, frozen=True):
    line_limit: int  # the longest line of the host's the daemon takes on it
    early: Sequence[bytes | Oversized]  # what the daemon sent after its answers


class OpeningRefused(msgspec.Struct, frozen=True):
    why: str
    profile: bool  # the daemon has no such profile (or not for this user)


async def open_connection(
    conn: trio.SocketStream, framer: LineFramer, profile: str | None
) -> Opened | OpeningRefused:
    """Ask what the bridge needs of a new connection, and wait for the answers."""
    meta = mcp.request_meta(mcp.LATEST_MODERN, {}, _INFO)
    asks = rpc.encode_request(LIMIT_ID, "mcpd/lineLimit", {"_meta": meta}) + b"\n"
    waiting = {LIMIT_ID}
    if profile is not None:
        params = {"profile": profile, "_meta": meta}
        asks += rpc.encode_request(PROFILE_ID, "mcpd/useProfile", params) + b"\n"
        waiting.add(PROFILE_ID)
    asked = "for the profile" if profile is not None else "for its line limit"
    limit = DEFAULT_MAX_LINE
    try:
        await conn.send_all(asks)
        with trio.fail_after(_WAIT):
            while True:
                data = await conn.receive_some(1 << 16)
                if not data:
                    return OpeningRefused(f"mcpd closed the connection when asked {asked}", False)
                lines = framer.feed(data)
                for at, line in enumerate(lines):
                    answer = None if isinstance(line, Oversized) else _answer(line, waiting)
                    if answer is None:
                        continue
                    waiting.discard(str(answer.id))
                    if isinstance(answer, rpc.ErrorResponse) and answer.id == PROFILE_ID:
                        return OpeningRefused(f"mcpd: {answer.error.message}", True)
                    if isinstance(answer, rpc.Response) and answer.id == LIMIT_ID:
                        limit = _limit_of(answer, limit)
                    if not waiting:
                        return Opened(limit, lines[at + 1 :])
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        return OpeningRefused(f"mcpd did not answer when asked {asked}", False)


def _answer(line: bytes, waiting: set[str]) -> rpc.Response | rpc.ErrorResponse | None:
    """The daemon's answer to one of the bridge's requests ``waiting``, if ``line`` is."""
    try:
        msg = envelope.decode_message(line)
    except rpc.DecodeFailure:
        return None
    if isinstance(msg, rpc.Response | rpc.ErrorResponse) and msg.id in waiting:
        return msg
    return None


def _limit_of(answer: rpc.Response, otherwise: int) -> int:
    try:
        return msgspec.json.decode(bytes(answer.result), type=_Limit).maxLineBytes
    except msgspec.DecodeError:
        return otherwise
