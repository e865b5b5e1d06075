"""Every configured server seen as one, for the agent side (``agents.backend.Servers``).

The agent side never holds a runner: it looks tools up in the table, starts calls by
alias, reads the servers' states, and subscribes to changes through this one door.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec import Raw

from protocol import mcp

from ..registry.table import Entry, Registry
from ..registry.views import ProfileView
from .calls import Done, PendingCall
from .outage import iso
from .progress import Deliver
from .supervisor import Supervisor


class Front:
    def __init__(self, supervisor: Supervisor, registry: Registry) -> None:
        self._supervisor = supervisor
        self._registry = registry
        self._listeners: list[Callable[[], None]] = []

    @property
    def version(self) -> int:
        return self._registry.version

    def listing(self) -> list[Raw]:
        return self._registry.listing()

    def lookup(self, name: str) -> Entry | None:
        return self._registry.lookup(name)

    def closest(self, name: str) -> list[str]:
        return self._registry.closest(name)

    def refresh(self) -> None:
        for runner in self._supervisor.runners.values():
            runner.maybe_refresh()

    def start_call(
        self,
        alias: str,
        params: mcp.CallToolParams,
        done: Done,
        *,
        capabilities: dict[str, Any] | None,
        on_progress: Deliver | None,
    ) -> PendingCall | None:
        runner = self._supervisor.runners.get(alias)
        if runner is None:
            return None
        return runner.start_call(params, done, capabilities=capabilities, on_progress=on_progress)

    def states(self) -> list[dict[str, Any]]:
        out = []
        for alias in sorted(self._supervisor.runners):
            runner = self._supervisor.runners[alias]
            entry: dict[str, Any] = {
                "server": alias,
                "state": runner.state,
                "available": runner.available,
            }
            if not entry["available"]:
                o = runner.outage()
                entry.update(reason=o.reason, since=iso(o.since), retry_at=iso(o.retry_at))
            out.append(entry)
        return out

    def outages(self, only: Callable[[str], bool] | None = None) -> list[str]:
        if only is None:
            return self._supervisor.outages()
        runners = self._supervisor.runners
        return [
            runners[a].outage().sentence()
            for a in sorted(runners)
            if only(a) and not runners[a].available
        ]

    def view_of(self, name: str) -> ProfileView:
        return ProfileView(name, self._registry)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self._listeners.append(on_change)

    def changed(self) -> None:
        """Something agents see changed (called by the wiring on a server's change)."""
        for listener in self._listeners:
            listener()
