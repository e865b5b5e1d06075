"""Agents told their tool list changed: ``notifications/tools/list_changed``, once for a
burst of changes, to each agent whose profile's list changed since it was last told.

A legacy agent hears it unsolicited; a modern one on each listen it holds open, tagged
with that listen's id. An agent hears only of its own profile's changes, and only those
made after it connected (``Audience.seen_version``): a change in a profile it does not
see is no news to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ..agent import Audience
from ..profiles import Profile

_DEBOUNCE: Final = 0.2
_METHOD: Final = "notifications/tools/list_changed"


class ToolNews:
    def __init__(
        self,
        agents: Callable[[], list[Audience]],
        view: Callable[[Audience], Profile],
    ) -> None:
        """``agents``: who may hear the news; ``view``: the profile each sees."""
        self._agents = agents
        self._view = view
        self._dirty = trio.Event()

    def changed(self) -> None:
        """Some profile's tools changed: its agents hear of it soon."""
        self._dirty.set()

    async def run(self) -> None:
        while True:
            await self._dirty.wait()
            # Coalesce a burst of changes (a restart touches many tools) into one.
            await trio.sleep(_DEBOUNCE)
            self._dirty = trio.Event()
            self._tell(rpc.encode_notification(_METHOD))

    def _tell(self, line: bytes) -> None:
        # A function of its own, so that the task keeps no connection while it waits:
        # one that has gone since would keep all it held (a line half read) alive.
        for conn in self._agents():
            # Only changes to its own profile after the agent connected are news to it.
            version = self._view(conn).version
            if conn.seen_version >= version:
                continue
            conn.seen_version = version
            if conn.session.legacy_version is not None:
                conn.send_nowait(line)
            for sub_id in conn.subscriptions:
                conn.send_nowait(
                    rpc.encode_notification(_METHOD, {"_meta": {mcp.KEY_SUBSCRIPTION_ID: sub_id}})
                )
