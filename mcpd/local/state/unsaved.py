"""Which of the files mcpd keeps its state in cannot be written now.

A write that fails (a full disk, a read-only directory) is said in the journal once,
and tried again; meanwhile what it would have saved lives in memory only, lost when mcpd
stops. ``mcpd status`` shows each such file, since when, and what is at stake, and the
journal says when a write works again, so an operator who saw the first line knows
when it is over.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from ...status_document import Unsaved

logger = logging.getLogger("mcpd.state")


class SaveWatch:
    """Whether the last write of one state file worked."""

    def __init__(self, what: str, meaning: str) -> None:
        self.what = what
        self._meaning = meaning
        self.unsaved: Unsaved | None = None

    def failed(self, path: str, problem: str) -> bool:
        """Whether ``problem`` is new: the first since the last write that worked, or
        another than the last (said in the journal once each, not at every write)."""
        new = self.unsaved is None or self.unsaved.problem != problem
        since = (
            self.unsaved.since
            if self.unsaved is not None
            else datetime.now(UTC).isoformat(timespec="seconds")
        )
        self.unsaved = Unsaved(self.what, path, since, problem, self._meaning)
        return new

    def saved(self) -> None:
        if self.unsaved is None:
            return
        logger.warning(
            "the %s can be saved to %s again (it could not be since %s)",
            self.what,
            self.unsaved.path,
            self.unsaved.since,
        )
        self.unsaved = None
