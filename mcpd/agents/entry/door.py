"""Who gets a connection on an agent socket: the peer's uid and groups, how many
connections it and everyone else hold, whether the first bytes are HTTP or a line of
JSON-RPC, whether the peer is one of mcpd's own servers' processes (let in only
through a profile whose ``allow_servers`` names that server, and never as the owner),
and whether a line connection ever asks for anything.

Refusing is done here, once and cheaply, before a connection costs a session: a
refused peer gets one JSON-RPC error line naming why, and the log gets a few lines
and then one per interval that says how many were not logged, not one per refusal.

How many connections everyone, one user and mcpd's own user and root may hold is
counted in ``places``.

A peer that says nothing is let go after ``first_message_timeout``, and so is a line
connection that has sent no request by then (only notifications, or lines that are
not JSON-RPC): it would hold its place and do nothing. Once it has asked something,
an agent may stay idle for as long as it likes, between lines: what the line
connections hold of lines not yet ended, and for how long, is ``unfinished``'s.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, Literal

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ...config.tables.model import DaemonConfig
from ...policy.deciders.kin import decider_of, kin_of, unknown_kin
from .peers import Peer, PeerWatch, is_allowed, peer_of, resolve_groups
from .places import Places, Seat
from .unfinished import UnfinishedLines

if TYPE_CHECKING:
    from ..connection.agent_connection import Connection

logger = logging.getLogger("mcpd.agents")

Allowed = Callable[[str], tuple[Iterable[int], Iterable[int]]]
# The server a pid belongs to (None: not a server's process).
ServerOf = Callable[[int], str | None]
# The profile that lets a server's processes in through a socket (None: none does).
Granted = Callable[[str, str | None], str | None]


Speaks = Literal["http", "lines"]
# The most a refused peer's bytes that are read and dropped before its socket is closed.
_DRAINED: Final = 64 * 1024
# A method token and its space ("GET ", "POST "), or as much of one as has arrived.
_REQUEST_LINE: Final = re.compile(rb"[A-Z]{1,7}(?: |\Z)")


class Door:
    def __init__(
        self,
        settings: Callable[[], DaemonConfig],
        allowed: Allowed,
        server_of: ServerOf,
        granted: Granted,
    ) -> None:
        """``allowed``: a profile socket's own uids and gids; ``server_of``: which
        server a process belongs to; ``granted``: the profile that lets a server's
        processes in."""
        self._settings = settings
        self._allowed = allowed
        self.places = Places()
        self.unfinished = UnfinishedLines(settings)  # of the line connections let in
        self._server_of = server_of
        self._granted = granted
        self._from_servers = Throttle()
        # Resolved again for each config a reload brings (a new list object), also
        # when the names are the same: the groups themselves may have changed.
        groups = settings().allow_groups
        self._gids_of: tuple[list[str], set[int]] = (groups, resolve_groups(groups))
        self._not_allowed = Throttle()
        self._silent = Throttle()
        self._gone = Throttle()  # refused: the process that connected had exited

    async def check(self, stream: trio.SocketStream, profile: str | None) -> Seat | None:
        """The connection's seat, to hold while it is served; None: it was refused
        (and closed)."""
        d = self._settings()
        socket_of = profile  # the profile whose own socket this is (None: the daemon's)
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
            await refuse_connection(
                stream,
                f"mcpd: uid {peer.uid} may not use this socket: neither it nor one of its "
                f"groups is in {keys} of mcpd's config",
            )
            return None
        server: str | None = None
        if peer is not None:
            known = self._known(stream, peer)
            if known is None:
                await refuse_connection(
                    stream,
                    "mcpd: the process that connected has already exited, so mcpd cannot "
                    "tell whose it is; connect from the process that uses the connection",
                )
                return None
            peer = known
            server = peer.server
        if peer is not None and server is not None:
            granted = self._granted(server, profile)
            if granted is None:
                self._refused_server(peer, server, profile)
                await refuse_connection(
                    stream,
                    f"mcpd: a process of the server {server!r} may not use this socket: no "
                    "profile's allow_servers names that server",
                )
                return None
            profile = granted
        refusal = self.places.refusal(d, peer, socket_of)
        if refusal is not None:
            await refuse_connection(stream, f"mcpd: {refusal}")
            return None
        return Seat(self.places.held, peer, profile, trio.current_time() + d.first_message_timeout)

    def _known(self, stream: trio.SocketStream, peer: Peer) -> Peer | None:
        """``peer`` with what /proc tells of it: the server it belongs to, its lineage
        and session, who may not decide its calls; None when it is gone before all of
        that was read (what was read may then be of another process, or of none)."""
        if peer.pid == 0:
            why = "the kernel gave no pid of it: it runs in another PID namespace"
            return msgspec.structs.replace(peer, unverified=True, kin=unknown_kin(why, peer.uid))
        watch = PeerWatch(stream.socket, peer.pid)
        try:
            server = self._server_of(peer.pid)
            decider = decider_of(peer.pid)
            kin = kin_of(peer.pid)
            if not watch.still_there():
                self._log_gone(peer)
                return None
        finally:
            watch.close()
        return msgspec.structs.replace(
            peer,
            server=server,
            lineage=decider.lineage,
            session=decider.session,
            lineage_cut=decider.cut,
            lineage_uids=decider.uids,
            lineage_sessions=decider.sessions,
            kin=msgspec.structs.replace(kin, uid=peer.uid),
        )

    def _log_gone(self, peer: Peer) -> None:
        held = self._gone.admit()
        if held is not None:
            logger.warning(
                "refused an agent connection from uid %d: its process (pid %d) had "
                "exited before mcpd could tell whose it is%s",
                peer.uid,
                peer.pid,
                f" ({held} more refused since the last such line)" if held else "",
                extra=log_extra(None, reason="the peer's process is gone"),
            )

    def _refused_server(self, peer: Peer, server: str, profile: str | None) -> None:
        held = self._from_servers.admit()
        if held is None:
            return
        where = "mcpd's socket" if profile is None else f"the socket of profile {profile!r}"
        logger.warning(
            "a process of the server %s (pid %d) connected to %s and was refused: no "
            "profile's allow_servers names that server%s",
            server,
            peer.pid,
            where,
            f" ({held} more refused since the last such line)" if held else "",
            extra=log_extra(server, "server_on_socket", "a server's process on mcpd's socket"),
        )

    def _allow_gids(self, groups: list[str]) -> set[int]:
        if self._gids_of[0] is not groups:
            self._gids_of = (groups, resolve_groups(groups))
        return self._gids_of[1]

    async def speaks(self, stream: trio.SocketStream, seat: Seat) -> Speaks | None:
        """Whether the first bytes are an HTTP request or a line; None: the peer hung
        up, or said nothing by the seat's deadline, and is to be let go."""
        with trio.move_on_at(seat.deadline):
            return await speaks(stream)
        self._log_silent(seat.peer, "sent nothing")
        return None

    async def expect_request(self, conn: Connection, seat: Seat) -> None:
        """Close ``conn``, saying why, if it has sent no request by the seat's deadline."""
        with trio.move_on_at(seat.deadline):
            await conn.asked.wait()
            return
        why = self._log_silent(seat.peer, "sent no request")
        conn.send_nowait(rpc.encode_error(None, -32000, f"mcpd: closing this connection: {why}"))
        with trio.move_on_after(1):
            await conn.drain()
        conn.close()

    def _log_silent(self, peer: Peer | None, what: str) -> str:
        why = (
            f"it {what} within {self._settings().first_message_timeout:g} s of connecting "
            "(daemon.first_message_timeout)"
        )
        held = self._silent.admit()
        if held is not None:
            logger.info(
                "closed an agent connection from %s: %s%s",
                f"pid {peer.pid}, uid {peer.uid}" if peer is not None else "an unknown peer",
                why,
                f" ({held} more since the last such line)" if held else "",
                extra=log_extra(None, reason="silent connection"),
            )
        return why


async def refuse_connection(stream: trio.SocketStream, message: str) -> None:
    # A peer that has hung up already must not take the daemon down with it: a
    # BrokenResourceError from this write would end serve_listeners, and mcpd.
    with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(rpc.encode_error(None, -32000, message) + b"\n")
        await stream.send_eof()
        # What the peer sent meanwhile is read and dropped, up to a bound, until it
        # hangs up: a socket closed with bytes unread is reset, and a peer that sent
        # its request at once would read the reset instead of why it was refused.
        left = _DRAINED
        while left > 0 and (dropped := await stream.receive_some(min(left, 16384))):
            left -= len(dropped)
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
    # A whole request line, not its first letter: an agent whose first line is a banner
    # or garbage ("Hello", "F\r...") would otherwise be an HTTP client that never gets
    # an answer.
    return "http" if _REQUEST_LINE.match(first) is not None else "lines"
