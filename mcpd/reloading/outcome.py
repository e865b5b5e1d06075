"""Whether what runs is what the config file says: a reload refused (a SIGHUP, or
``mcpd reload``) leaves the configuration read before in force while the file holds
another, which ``mcpd status`` and the status page say until a later reload is taken.
A refusal by SIGHUP has no one to answer but the journal, so status is where a
person who edited the file learns it never applied."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from protocol.jsonrpc import messages as rpc

from ..config.tables.model import CONFIG_ERROR


class RefusedReload(msgspec.Struct, frozen=True):
    """``reload_refused`` in ``mcpd status --json``: times in ISO 8601, UTC."""

    at: str  # when the reload was refused
    reason: str  # what the config error said
    config_read: str  # when the configuration that runs was read


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
