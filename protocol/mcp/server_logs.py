"""Server log messages: the syslog severities, ``logging/setLevel``, and
``notifications/message``, sans-IO.

A log message's ``data`` is whatever the server chose to send (a string, an object);
it stays ``msgspec.Raw`` so it reaches an agent byte for byte.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..jsonrpc import messages as rpc
from ..shown.visible import cut
from .core import Meta

# Least severe first: an index is how severe a level is.
LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_RANK: Final = {level: i for i, level in enumerate(LEVELS)}


class SetLevelParams(msgspec.Struct, omit_defaults=True):
    level: str
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class LogMessage(msgspec.Struct, omit_defaults=True):
    level: str
    data: Raw
    logger: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


_message = msgspec.json.Decoder(LogMessage)


def rank(level: object) -> int | None:
    """How severe ``level`` is (0 for debug), or None for no known level."""
    return _RANK.get(level) if isinstance(level, str) else None


def checked_level(params: Raw | None) -> str:
    """The level a ``logging/setLevel`` asks for; raises ``rpc.RPCError`` naming the
    levels there are when it is not one of them."""
    try:
        level = rpc.decode_as(params, SetLevelParams).level
    except rpc.InvalidParams:
        level = None
    if rank(level) is None:
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"unknown log level {level!r}; the levels are {', '.join(LEVELS)}",
        )
    assert level is not None
    return level


def decode_log_message(params: bytes | None) -> LogMessage | None:
    """A ``notifications/message``'s params, or None when they are not one."""
    if not params:
        return None
    try:
        msg = _message.decode(params)
    except (msgspec.DecodeError, RecursionError):
        return None
    return msg if rank(msg.level) is not None else None


def data_text(msg: LogMessage, limit: int = 500) -> str:
    """The message's data as a line of text for mcpd's own log."""
    try:
        data = msgspec.json.decode(msg.data)
    except msgspec.DecodeError:
        return ""
    return cut(data if isinstance(data, str) else msgspec.json.encode(data).decode(), limit)
