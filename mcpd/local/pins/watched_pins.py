"""The pins as the daemon keeps them, with whether they are on disk now
(``state.unsaved``): an approval that cannot be saved holds until mcpd stops, and
``mcpd status`` says so."""

from __future__ import annotations

from collections.abc import Callable

from ...registry.pinning.review import Review
from ..state.unsaved import SaveWatch
from .pinfile import PinKeeper


class WatchedPins(PinKeeper):
    """The pins, and whether they are on disk now."""

    def __init__(
        self,
        path: str,
        review: Review,
        rejudge: Callable[[str], None],
        configured: Callable[[str], bool],
        holds_new: Callable[[str], bool],
    ) -> None:
        super().__init__(path, review, rejudge, configured, holds_new)
        self.saving = SaveWatch("pins", "approvals made since are kept in memory only")

    async def flush(self) -> bool:
        saved = await super().flush()
        if saved:
            self.saving.saved()
        else:
            self.saving.failed(self.path, "see the journal")
        return saved
