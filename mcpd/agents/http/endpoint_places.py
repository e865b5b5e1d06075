"""How many connections the HTTP endpoint holds once they got past its gate, and
whether one more may be served, by the rules the agent sockets keep (``places``), with
the endpoint's own count:

- the agents' connections (any request with the token): everyone together may hold
  ``max_connections``, one user other than mcpd's own and root
  ``max_connections_per_uid`` of them, and mcpd's own user and root ``OWNER_RESERVE``
  more;
- the status page's (its paths, asked for without the token): ``PAGE_PLACES``, shared
  out the same way, which no agent can take. A browser cannot send the token, so one
  who holds every agent place still leaves a person the page, where ``ask`` calls are
  decided.

The user is the one the kernel names as holding the connection's other end
(``local.ownership.tcp_holder``); a client it cannot name (on another machine, or in another
network namespace) counts as one user of its own, with a share like the others'.

A connection keeps the kind of its first request: one that asks for the other kind
after it is answered and closed, so that no agent holds the page's places.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import h11
import msgspec
import trio

from ...config.tables.model import DaemonConfig
from ...local.ownership.tcp_holder import HolderUnknown, tcp_holder
from ..entry.peers import owners_uid
from ..entry.places import PlaceLimits, Places, socket_limits
from ..page import is_page
from .wire import Headers, Reject

# The status page's own places, for people's browsers (a tab holds a few).
PAGE_PLACES: Final = 32
_PAGE: Final = PlaceLimits(
    PAGE_PLACES, PAGE_PLACES // 4, f"a quarter of the status page's {PAGE_PLACES} places"
)


def for_page(request: h11.Request) -> bool:
    """Whether ``request`` takes a place of the page's: one of its paths, asked for
    without the token (with it, it is an agent's like any other)."""
    return is_page(request.target) and Headers(request.headers).get("authorization") is None


async def holder_uid(sock: trio.socket.SocketType) -> int | None:
    """The user the kernel names as holding the other end of ``sock`` (None: it names
    none), asked off the event loop: its tables may be read instead."""
    try:
        return (await trio.to_thread.run_sync(tcp_holder, sock)).uid
    except HolderUnknown:
        return None


class EndpointPlaces:
    def __init__(self) -> None:
        self.agents = Places("agent connections on the HTTP endpoint")
        self.page = Places("connections to the status page on the HTTP endpoint")

    @contextmanager
    def seat(self, d: DaemonConfig, uid: int | None, page: bool) -> Iterator[str | None]:
        """A place of the page's (``page``) or the agents' for a connection of ``uid``
        while the ``with`` block runs; what it yields is why there is none (None: it
        has one)."""
        places, limits = (self.page, _PAGE) if page else (self.agents, socket_limits(d))
        owner = owners_uid(uid)
        who = "a client whose user mcpd cannot name" if uid is None else f"uid {uid}"
        refusal = places.refusal_of(limits, uid, owner, who)
        if refusal is not None:
            yield refusal
            return
        places.held.take(uid)
        try:
            yield None
        finally:
            places.held.give(uid)


def same_kind(request: h11.Request, page: bool) -> None:
    """Refuses (Reject) a request on a connection seated for the other kind (``page``:
    the page's): it asks on a connection of its own."""
    if for_page(request) != page:
        whose = "the status page's" if page else "an agent's"
        message = f"this connection holds {whose} place: ask for this on another connection"
        body = msgspec.json.encode({"error": message})
        raise Reject(400, body, [(b"connection", b"close")])
