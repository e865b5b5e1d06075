"""Who holds the other end of a connection to mcpd: the local user, and whether it is
one of mcpd's servers.

mcpd's stdio servers run as mcpd's own user, and one that keeps the host's network
(every level but ``network = false``) reaches the HTTP endpoint as any program of that
user does. So what the endpoint grants for a connection's uid or for a secret it
brings is granted only where no process that holds the connection is one of mcpd's
servers or descends from one (``server_of``: by its parent chain, or by the start mark
a server's descendants inherit): a page's session, a one-time code's trade, the
endpoint's token. The socket grants a server's process nothing either, but through a
profile's ``allow_servers`` (``door``).

On the socket the kernel names the peer, whose server the door has read already. On
the TCP endpoint the kernel names the user of the socket at the other end
(``local.ownership.tcp_holder``); a user other than mcpd's is no server's, and nothing more is
looked for. For mcpd's own user, the processes that hold that socket are looked for in
/proc, off the event loop. Where none is found, the connection cannot be told from a
server's (a server's process that put its socket in flight, or made itself unreadable,
holds it as far as anyone can see), and it is taken for one that may be.

What is found is kept for the connection's life (``HolderLookup``): a browser's or
an agent's connection stays theirs, and the page's event stream and actions ask once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

import h11
import trio

from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ...local.ownership.tcp_holder import (
    HolderUnknown,
    ServerNotRuledOut,
    first_holders,
    holds,
    tcp_holder,
)
from ...policy.deciders.kin import AgentKin, Decider, tcp_deciders, tcp_kin
from ..http.wire import Headers, Reject
from .identity import Holder

if TYPE_CHECKING:
    from .peers import Peer

logger = logging.getLogger("mcpd.http")
_T = TypeVar("_T")

# The server a pid belongs to, or descends from (None: no server's).
ServerByDescent = Callable[[int], str | None]
# The server whose host loopback grant mcpd relays through its own connection from a
# port of 127.0.0.1 to another (None: no relay's).
RelayedBy = Callable[[int, int], str | None]
# Where mcpd's relay connects from, as an IPv4 or a dual-stack listener sees it.
_RELAY_ADDRESSES: Final = frozenset({"127.0.0.1", "::ffff:127.0.0.1"})
# How long the processes that hold a connection may be looked for in /proc, from when
# the look begins.
LOOKUP: Final = 5.0


class HolderLookup:
    """Who holds the other end of one connection: looked up the first time it is asked
    for, then kept for the connection's life, a failure too."""

    __slots__ = ("_found", "_look")

    def __init__(self, look: Callable[[], Awaitable[Holder]]) -> None:
        """``look``: who holds it; raises HolderUnknown, saying why it cannot be told."""
        self._look = look
        self._found: Holder | HolderUnknown | None = None

    @classmethod
    def of_peer(cls, peer: Peer) -> HolderLookup:
        """A socket's peer, as the door read it."""

        async def known() -> Holder:
            return Holder(peer.uid, peer.server, peer.pid)

        return cls(known)

    async def held(self) -> Holder:
        """Who holds it; raises HolderUnknown (ServerNotRuledOut), saying why it is not known."""
        if self._found is None:
            try:
                self._found = await self._look()
            except HolderUnknown as exc:
                self._found = exc
        if isinstance(self._found, HolderUnknown):
            raise type(self._found)(str(self._found))
        return self._found


class Lookups:
    """What the processes that hold a TCP connection are checked against: the servers'
    processes (``server_of``; ``server_pids``, the first of each, whose process trees
    are looked in first) and the relay's connections (``relayed_by``). One connection's
    processes are looked for at a time: a scan is reads of /proc that a second one
    only slows, and each is given ``LOOKUP`` of its own once it begins."""

    def __init__(
        self,
        server_of: ServerByDescent,
        relayed_by: RelayedBy,
        server_pids: Callable[[], list[int]],
    ) -> None:
        self.server_of = server_of
        self.relayed_by = relayed_by
        self.server_pids = server_pids
        self.one_at_a_time = trio.Lock()


async def tcp_held(sock: trio.socket.SocketType, lookups: Lookups) -> Holder:
    """Who holds the other end of the TCP connection ``sock``; raises HolderUnknown
    where its user cannot be found, ServerNotRuledOut where it is mcpd's own user and the
    processes that hold it cannot be. A connection mcpd's relay opened for a server's
    host loopback grant is that server's, whose process holds it or not.

    The servers' processes are looked in first, and all of their holders found there;
    where none holds it, the look ends at the first other process that does: one
    process that is no server's is all an answer takes, and a server's connection
    costs a look through its own processes."""
    try:
        peer, own = sock.getpeername(), sock.getsockname()
    except OSError:
        pass  # tcp_holder says why
    else:
        if peer[0] in _RELAY_ADDRESSES:
            server = lookups.relayed_by(peer[1], own[1])
            if server is not None:
                return Holder(os.geteuid(), server)
    held = tcp_holder(sock)
    if held.uid != os.geteuid():
        return Holder(held.uid)  # mcpd's servers run as mcpd's user
    async with lookups.one_at_a_time:
        until = time.monotonic() + LOOKUP
        try:
            # Not abandoned when cancelled: the scan ends by ``until`` on its own.
            pids = await trio.to_thread.run_sync(first_holders, held, lookups.server_pids(), until)
        except TimeoutError:
            raise ServerNotRuledOut(
                "looking for the processes that hold it in /proc took too long"
            ) from None
    link = f"socket:[{held.inode}]"
    still: list[int] = []
    for pid in pids:
        server = lookups.server_of(pid)
        # What was read counts only if the pid holds the socket still after: it may
        # have passed to another process meanwhile.
        if not holds(f"/proc/{pid}", link):
            continue
        if server is not None:
            return Holder(held.uid, server, pid)
        still.append(pid)
    if not still:
        raise ServerNotRuledOut(
            "no process that mcpd can read holds its other end, so nothing tells it "
            "from one of mcpd's servers"
        )
    return Holder(held.uid, pid=still[0])


class TcpKin:
    """The processes that hold the other end of one TCP connection: as the agent on it
    (``kin``: who may not decide what it asks) and as those who decide through it
    (``deciders``). Each is looked for in /proc the first time it is asked for, one
    connection's look at a time (``Lookups``: every connection's end and every approval
    asks, and a client may open connections by the hundred), within ``LOOKUP`` once
    begun and never abandoned; then kept for the connection's life."""

    __slots__ = ("_deciders", "_kin", "_lookups", "_sock")

    def __init__(self, sock: trio.socket.SocketType, lookups: Lookups) -> None:
        self._sock = sock
        self._lookups = lookups
        self._kin: AgentKin | None = None
        self._deciders: tuple[Decider, ...] | None = None

    async def kin(self) -> AgentKin:
        if self._kin is None:
            self._kin = await self._look(tcp_kin)
        return self._kin

    async def deciders(self) -> tuple[Decider, ...]:
        if self._deciders is None:
            self._deciders = await self._look(tcp_deciders)
        return self._deciders

    async def _look(self, read: Callable[[trio.socket.SocketType, float], _T]) -> _T:
        async with self._lookups.one_at_a_time:
            return await trio.to_thread.run_sync(read, self._sock, time.monotonic() + LOOKUP)


class ServerRefusals:
    """The log's word on the servers' processes refused on the endpoint, and on the
    token refused where they cannot be told apart: a few lines of each, then one an
    interval that says how many were not logged."""

    def __init__(self) -> None:
        self._throttle = Throttle()
        self._unknown = Throttle()

    def unknown(self, why: str) -> None:
        """The token was refused on a connection that may be a server's (``why``)."""
        kept = self._unknown.admit()
        if kept is None:
            return
        logger.warning(
            "a request with the endpoint's token was refused: mcpd cannot tell its "
            "connection from one of its servers' (%s)%s",
            why,
            f" ({kept} more refused since the last such line)" if kept else "",
            extra=log_extra(None, "holders_unknown_on_endpoint", "a connection no one holds"),
        )

    def refused(self, held: Holder, brought: str) -> None:
        """``held`` (a server's) brought ``brought`` and was refused."""
        kept = self._throttle.admit()
        if kept is None:
            return
        logger.warning(
            "%s brought %s to mcpd's HTTP endpoint and was refused: no process of "
            "mcpd's servers is served there%s",
            _whose(held),
            brought,
            f" ({kept} more refused since the last such line)" if kept else "",
            extra=log_extra(
                held.server, "server_on_endpoint", "a server's process on the endpoint"
            ),
        )


def _whose(held: Holder) -> str:
    if held.pid is None:
        return f"the server {held.server}, through mcpd's relay of its host loopback grant,"
    return f"a process of the server {held.server} (pid {held.pid})"


def servers_process(held: Holder) -> str:
    """Why ``held``, a server's process, is refused."""
    if held.pid is None:
        by = f"mcpd's relay of the server {held.server!r}'s host loopback grant"
    else:
        by = f"a process of the server {held.server!r} (pid {held.pid}), which mcpd runs"
    return (
        f"this connection is held by {by}: nothing on mcpd's HTTP endpoint is granted to "
        "one of its servers' processes"
    )


async def token_bearer(
    request: h11.Request, holder: HolderLookup | None, refusals: ServerRefusals
) -> Holder | None:
    """Refuses (Reject) ``request``, which its gate let in, where it brings the
    endpoint's token on a connection that one of mcpd's servers holds, or may; else
    who holds it, where that was looked for and found."""
    if holder is None or Headers(request.headers).get("authorization") is None:
        return None
    try:
        held = await holder.held()
    except ServerNotRuledOut as exc:
        refusals.unknown(str(exc))
        why = f"Forbidden: mcpd cannot tell this connection from one of its servers': {exc}"
        raise Reject(403, rpc.encode_error(None, -32001, why)) from None
    except HolderUnknown:
        # Its user cannot be found, and its address is none of this machine's: a client
        # on another machine or in another network namespace, where no server of
        # mcpd's runs, or a kernel that cannot be asked. The token is all there is to go
        # by.
        return None
    if held.server is not None:
        refusals.refused(held, "the endpoint's token")
        why = f"Forbidden: {servers_process(held)}"
        raise Reject(403, rpc.encode_error(None, -32001, why))
    return held
