"""What ``mcpd bridge`` has asked the daemon and not yet heard back: the host's
requests, each with the connection it went on, and the bridge's own.

Whoever takes a host's id from the ledger answers it (the daemon's reply, or the
bridge's error when the connection is gone), so each request is answered once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc

LISTEN: Final = "subscriptions/listen"


class OpenRelays:
    """The host's requests relayed and not answered yet."""

    def __init__(self) -> None:
        # id -> (the connection it went on, whether it is a listen, which stays open)
        self._ids: dict[rpc.Id, tuple[object, bool]] = {}
        # Set while no call but listens waits for its answer.
        self.calls_answered = trio.Event()
        self.calls_answered.set()
        self._calls = 0

    def __contains__(self, rid: object) -> bool:
        return rid in self._ids

    def add(self, link: object, ids: Iterable[rpc.Id], method: str | None = None) -> None:
        for rid in ids:
            if rid in self._ids:
                continue  # the daemon refuses an id in use: one answer, taken once
            listen = method == LISTEN
            self._ids[rid] = (link, listen)
            if not listen:
                self._calls += 1
                if self.calls_answered.is_set():
                    self.calls_answered = trio.Event()

    def take(self, rid: rpc.Id) -> bool:
        """Whether ``rid`` was waiting; it is not any more, and the caller answers it."""
        got = self._ids.pop(rid, None)
        if got is None:
            return False
        if not got[1]:
            self._calls -= 1
            if not self._calls:
                self.calls_answered.set()
        return True

    def take_all(self, link: object) -> list[rpc.Id]:
        """The ids still waiting on ``link``, each taken."""
        ids = sorted((rid for rid, (on, _) in self._ids.items() if on is link), key=str)
        return [rid for rid in ids if self.take(rid)]

    def listens(self) -> list[rpc.Id]:
        return [rid for rid, (_, listen) in self._ids.items() if listen]


class OwnRequests:
    """The bridge's own requests to the daemon, under ids no request of the host's
    waiting now has; a host's request that names one of them is refused."""

    def __init__(self) -> None:
        self._count = 0
        self._pending: dict[rpc.Id, str] = {}  # id -> method

    def new(self, method: str, host: OpenRelays) -> rpc.Id:
        while True:
            self._count += 1
            rid = f"mcpd-bridge-{self._count}"
            if rid not in host:
                self._pending[rid] = method
                return rid

    def __contains__(self, rid: object) -> bool:
        return rid in self._pending

    def answered(self, rid: rpc.Id) -> str | None:
        """The method of the bridge's own request ``rid`` answers, or None when it is
        not one of them."""
        return self._pending.pop(rid, None)

    def forget(self) -> None:
        """The connection they went on is gone: their answers will not come."""
        self._pending.clear()
