"""Where the TCP endpoint's new connections wait for their first headers, and which
one goes when the places are all taken.

The lobby has a fixed number of places, so a flood of connections that never send
their headers holds no more than that many descriptors. When it is full, a newcomer
takes the place of the one that has waited longest among those of the source
address that holds the most places, the newcomer's own included; between sources
that hold as many, the longest wait goes first. So:

- a flood from other addresses never pushes out a connection while its own address
  holds fewer places than the flooding one: the flood pushes out its own;
- between connections from one address (everything on loopback, usually), the
  newest pushes out the one that has waited longest: a client that is slow to send
  its headers is pushed out once as many have come after it as there are places.

What tells a slow client from a flood is only where they come from: a flood from
the client's own address (another local program connecting to 127.0.0.1, as the
client does) is told apart by nothing, nor is one spread over as many addresses as
the lobby has places (any local program may connect from any 127.x.y.z).

A newcomer always gets a place. Keeping places for some minimum time and turning
newcomers away meanwhile would not help there: under a flood, places come free no
faster than the flood takes them, so whoever arrives in between, a client whose
headers came with its connection included, would be turned away instead.
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Final

import trio

# An IPv6 host usually has a whole /64 to choose its addresses from.
_V6_PREFIX: Final = 64


def source_of(stream: trio.SocketStream) -> str:
    """The address a connection comes from, as the lobby counts it: an IPv4 address
    (also one mapped into IPv6), or an IPv6 /64."""
    try:
        peer = stream.socket.getpeername()
    except OSError:
        return "unknown"  # gone already
    if not isinstance(peer, tuple):
        return "unknown"  # not an IP socket
    try:
        ip = ipaddress.ip_address(str(peer[0]).partition("%")[0])
    except ValueError:
        return "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, _V6_PREFIX), strict=False))
    return str(ip)


class Lobby:
    def __init__(self, places: int) -> None:
        self.places = places
        self._taken = 0
        # Each source's waiting connections, longest waiting first, with their turn.
        self._by_source: dict[str, dict[trio.CancelScope, int]] = {}
        self._turns = itertools.count()

    def enter(self, scope: trio.CancelScope, source: str) -> str | None:
        """Give ``scope``'s connection a place; when there was none, the one pushed
        out is cancelled and the source it came from is returned."""
        pushed = self._push_out(source) if self._taken >= self.places else None
        self._by_source.setdefault(source, {})[scope] = next(self._turns)
        self._taken += 1
        return pushed

    def leave(self, scope: trio.CancelScope, source: str) -> None:
        waiting = self._by_source.get(source)
        if waiting is None or waiting.pop(scope, None) is None:
            return  # pushed out already
        self._taken -= 1
        if not waiting:
            del self._by_source[source]

    def _push_out(self, newcomer: str) -> str:
        def claim(source: str) -> tuple[int, int]:
            waiting = self._by_source[source]
            return len(waiting) + (source == newcomer), -next(iter(waiting.values()))

        source = max(self._by_source, key=claim)
        scope = next(iter(self._by_source[source]))
        self.leave(scope, source)
        scope.cancel()
        return source
