"""What a reload came to. Taken, a ``ReloadReport``: the servers it added, removed,
restarted and left alone, and the settings it put in force, what ``mcpd reload`` is
answered and prints. Refused (a SIGHUP, or ``mcpd reload``), the configuration read
before stays in force while the file holds another, which ``mcpd status`` and the
status page say until a later reload is taken: a refusal by SIGHUP has no one to
answer but the journal, so status is where a person who edited the file learns it
never applied."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from protocol.jsonrpc import messages as rpc

from ..config.tables.model import CONFIG_ERROR
from ..status_document import RefusedReload


class ReloadReport(msgspec.Struct):
    """The answer to ``mcpd/reload``, its fields in the order the JSON shows them."""

    added: list[str]
    removed: list[str]
    changed: list[str]
    unchanged: list[str]
    # Settings that changed but apply only when mcpd starts again.
    restart: list[str] = msgspec.field(default_factory=list)
    # The rest of what changed but the servers (profiles, policy, daemon keys): in force.
    settings: list[str] = msgspec.field(default_factory=list)
    # Settings in force for the connections opened from now, not those open.
    new_connections: list[str] = msgspec.field(default_factory=list)
    # Why each of ``changed`` restarts whose own table did not change: a restart
    # nobody asked for in the file is said, not only logged.
    why: dict[str, str] = msgspec.field(default_factory=dict)


class ReloadOutcome:
    def __init__(self) -> None:
        self._read = datetime.now(UTC)
        self._refused: tuple[datetime, str] | None = None

    def refused(self, exc: rpc.RPCError) -> None:
        """A reload refused with ``exc``: the configuration read before runs on."""
        said = exc.data.get(CONFIG_ERROR) if isinstance(exc.data, dict) else None
        self._refused = (datetime.now(UTC), said if isinstance(said, str) else exc.message)

    def taken(self) -> None:
        """A reload put its configuration in force: what runs is the file read now."""
        self._read = datetime.now(UTC)
        self._refused = None

    def refusal(self) -> RefusedReload | None:
        if self._refused is None:
            return None
        at, reason = self._refused
        return RefusedReload(_iso(at), reason, _iso(self._read))

    def warning(self) -> str | None:
        """The refusal for people, in the daemon's local time, as the page shows times."""
        if self._refused is None:
            return None
        at, reason = self._refused
        return (
            f"the reload at {_clock(at)} was refused, and the configuration read at "
            f"{_clock(self._read)} runs still: {reason}"
        )


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="seconds")


def _clock(at: datetime) -> str:
    return at.astimezone().strftime("%H:%M:%S")
