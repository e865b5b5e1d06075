"""Who gets a connection: the connection limit, the peer's uid and groups, and whether
the first bytes are HTTP or a line of JSON-RPC.

Refusing is done here, once and cheaply, before a connection costs a session: a
refused peer gets one JSON-RPC error line naming why, and the log gets a few lines
and then one per interval that says how many were not logged, not one per refusal.
A peer that says nothing is let go after ``first_message_timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from collections.abc import Callable, Iterable
from typing import Final, Literal

import trio

from protocol import jsonrpc as rpc
from protocol.logfields import log_extra

from ..config.model import DaemonConfig
from ..host.ratelimit import Throttle
from .peers import Peer, is_allowed, peer_of, resolve_groups

logger = logging.getLogger("mcpd.api")

Allowed = Callable[[str], tuple[Iterable[int], Iterable[int]]]
Speaks = Literal["http", "lines"]
# A method token and its space ("GET ", "POST "), or as much of one as has arrived.
_REQUEST_LINE: Final = re.compile(rb"[A-Z]{1,7}(?: |\Z)")


class Door:
    def __init__(
        self, settings: Callable[[], DaemonConfig], open_now: Callable[[], int], allowed: Allowed
    ) -> None:
        """``open_now``: connections being served; ``allowed``: a profile socket's
        own uids and gids."""
        self._settings = settings
        self._open_now = open_now
        self._allowed = allowed
        # Resolved again for each config a reload brings (a new list object), also
        # when the names are the same: the groups themselves may have changed.
        groups = settings().allow_groups
        self._gids_of: tuple[list[str], set[int]] = (groups, resolve_groups(groups))
        self._full = Throttle(burst=1)  # refused at max_connections
        self._not_allowed = Throttle()
        self._silent = Throttle()
        self._sniffing = 0  # accepted connections whose first byte has not come yet

    async def check(
        self, stream: trio.SocketStream, profile: str | None
    ) -> tuple[bool, Peer | None]:
        """Whether the connection may go on (if not, it was refused and closed), and
        its peer (None where the socket cannot tell)."""
        d = self._settings()
        # Connections that have not sent a byte count too: they used to escape the
        # limit, so any number of silent ones could take all of mcpd's descriptors.
        if self._open_now() + self._sniffing >= d.max_connections:
            held = self._full.admit()
            if held is not None:
                peer = peer_of(stream.socket)
                logger.warning(
                    "too many agent connections (limit %d): refused %d, the latest from %s",
                    d.max_connections,
                    held + 1,
                    f"pid {peer.pid}, uid {peer.uid}" if peer is not None else "an unknown peer",
                    extra=log_extra(None, reason="too many connections"),
                )
            await refuse(stream, f"mcpd: too many connections (limit {d.max_connections})")
            return False, None
        peer = peer_of(stream.socket)
        uids: Iterable[int] = d.allow_uids
        gids: Iterable[int] = self._allow_gids(d.allow_groups)
        if profile is not None:
            uids, gids = self._allowed(profile)
        if peer is not None and not is_allowed(peer, uids, set(gids)):
            keys = "daemon" if profile is None else f"profiles.{profile}"
            keys = f"{keys}.allow_uids/allow_groups"
            held = self._not_allowed.admit()
            if held is not None:
                logger.warning(
                    "refused an agent connection from uid %d (pid %d): not allowed by %s%s",
                    peer.uid,
                    peer.pid,
                    keys,
                    f" ({held} more refused since the last such line)" if held else "",
                    extra=log_extra(None, reason=f"uid {peer.uid} not allowed"),
                )
            await refuse(
                stream,
                f"mcpd: uid {peer.uid} may not use this socket: neither it nor one of its "
                f"groups is in {keys} of mcpd's config",
            )
            return False, peer
        return True, peer

    def _allow_gids(self, groups: list[str]) -> set[int]:
        if self._gids_of[0] is not groups:
            self._gids_of = (groups, resolve_groups(groups))
        return self._gids_of[1]

    async def speaks(self, stream: trio.SocketStream, peer: Peer | None) -> Speaks | None:
        """Whether the first bytes are an HTTP request or a line (counted against the
        limit while they are awaited); None: the peer hung up, or said nothing within
        ``first_message_timeout``, and is to be let go."""
        timeout = self._settings().first_message_timeout
        self._sniffing += 1
        try:
            with trio.move_on_after(timeout):
                return await speaks(stream)
        finally:
            self._sniffing -= 1
        held = self._silent.admit()
        if held is not None:
            logger.info(
                "closed an agent connection from %s: it sent nothing within %g s "
                "(daemon.first_message_timeout)%s",
                f"pid {peer.pid}, uid {peer.uid}" if peer is not None else "an unknown peer",
                timeout,
                f" ({held} more since the last such line)" if held else "",
                extra=log_extra(None, reason="silent connection"),
            )
        return None


async def refuse(stream: trio.SocketStream, message: str) -> None:
    # A peer that has hung up already must not take the daemon down with it: the
    # BrokenResourceError from this write used to end serve_listeners, and mcpd.
    with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(rpc.encode_error(None, -32000, message) + b"\n")
    await stream.aclose()


async def speaks(stream: trio.SocketStream) -> Speaks | None:
    """Whether the peer opened with an HTTP request line or not (None: it hung up);
    nothing is consumed."""
    try:
        first: bytes = await stream.socket.recv(8, socket.MSG_PEEK)
    except OSError:
        return None
    if not first:
        return None
    # One capital letter was enough before: an agent whose first line was a banner or
    # garbage ("Hello", "F\r...") became an HTTP client that never got an answer.
    return "http" if _REQUEST_LINE.match(first) is not None else "lines"
