"""What the gate tells the journal of one list of one server: each change and each
finding once per definition, the first few one record each and the rest counted in
one record, so a server that changes everything every time is no journal flood."""

from __future__ import annotations

import logging
from typing import Final

from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ..findings.rules import Finding

logger = logging.getLogger("mcpd.registry")

IN_JOURNAL: Final = 5  # records one list's changes get before the rest are counted


class News:
    """What one list of one server changed or was found to hold, for the journal: the
    first few one record each, the rest in one record."""

    def __init__(self, alias: str, kind: str) -> None:
        self.alias = alias
        self.kind = kind
        self.said = 0
        self.more = 0

    def _say(self, level: int, event: str, name: str, message: str, reason: str) -> None:
        if self.said >= IN_JOURNAL:
            self.more += 1
            return
        self.said += 1
        what = f"{self.kind} {name!r}" if name else self.kind  # instructions have no name
        logger.log(
            level,
            "%s: %s: %s",
            self.alias,
            what,
            message,
            extra=log_extra(self.alias, event, reason, item=name or None, kind=self.kind),
        )

    def change(self, name: str, how: str, handling: str, was: str | None = None) -> None:
        """``was``: the name the item was approved under, when the server renamed it."""
        what = {
            "changed": "its definition changed since it was approved",
            "forgotten": (
                "its name is among those whose pins the server had mcpd forget, "
                "or matches one by chance"
            ),
            "added": "new since the server was approved",
            "new": "new since the server was approved",
        }[how]
        if was is not None and was != name:
            what += f" (approved as {was!r})"
        setting = "on_changed_item" if how == "changed" else "on_new_item"
        done = {
            "hold": f"held until `mcpd approve {self.alias}`",
            "warn": f"taken, as {setting} = warn says",
            "accept": f"taken, as {setting} = accept says",
        }[handling]
        if how == "forgotten" and handling != "hold":
            done = "taken, as neither on_changed_item nor on_new_item is hold"
        level = logging.INFO if handling == "accept" else logging.WARNING
        self._say(level, "definition_changed", name, f"{what}; {done}", how)

    def finding(self, name: str, findings: tuple[Finding, ...]) -> None:
        rules = ", ".join(sorted({f.rule for f in findings}))
        where = findings[0].where
        self._say(
            logging.WARNING,
            "finding",
            name,
            f"{rules} in {where}: {quote(findings[0].excerpt)} (`mcpd tools --findings`)",
            rules,
        )

    def flush(self) -> None:
        if self.more:
            logger.warning(
                "%s: %d more changes or findings in its %s list (`mcpd tools --pending`, "
                "`mcpd tools --findings`)",
                self.alias,
                self.more,
                self.kind,
                extra=log_extra(self.alias, "definition_changed", "more"),
            )
