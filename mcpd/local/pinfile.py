"""``pins.json`` in the state directory: the definitions approved of every server's
tools, prompts and templates (``registry.pins``), and what ``mcpd approve``, ``mcpd
tools --pending|--findings`` and ``mcpd pins export|import`` ask of them.

The file is read once at start-up, before any server lists anything, and rewritten
(whole and private: ``privatefile``) after each change: soon after for what mcpd pins
by itself (a first sight, a change taken under ``warn``; while such changes keep
coming, paced: ``pacing``), and before the command returns for what a person
approves or imports. Unlike the last known tools, pins are
not a cache: a file that cannot be read is set aside (``pins.json.unreadable``), and
no server counts as approved until a person approves it again, so a damaged file
cannot let a changed server through.

Only the digests stay in memory (``registry.pinned``); the file is where the
definitions are (``pinrecords``). It is read again for the few a held item or a
command needs, and each rewrite (``pinwriter``) takes what did not change from the
file it replaces, and makes the rest from what the servers listed. If another
program changed the file while mcpd runs and it no longer holds a definition mcpd
pinned, the rewrite fails, says which, and leaves the file as it is (the next start
reads it).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any, Final

import msgspec
import trio

from protocol.logfields import log_extra

from ..registry.judged import HeldKind, Pending, held_reason
from ..registry.pinned import Found, Pins, Wanted
from ..registry.pins import BadPins
from ..registry.review import Review
from . import pinrecords, pinwriter
from .pacing import Paced
from .pinrecords import Sections, decode

logger = logging.getLogger("mcpd.state")

FILE_NAME: Final = "pins.json"


class PinKeeper:
    """Keeps ``review``'s pins in ``path``. ``rejudge(alias)`` puts a server's lists
    through the gate again (after an approval or an import) and tells agents;
    ``configured(alias)`` says whether a server of that alias is in the config."""

    def __init__(
        self,
        path: str,
        review: Review,
        rejudge: Callable[[str], None],
        configured: Callable[[str], bool],
    ) -> None:
        self.path = path
        self.review = review
        self._rejudge = rejudge
        self._configured = configured
        self._paced = Paced()
        self._writing = trio.Lock()
        self._sections: Sections | None = None  # where each server's part is in the file
        self._last_error: str | None = None
        review.on_pinned = self.changed
        review.stored = self.stored

    # -- the file --

    async def load(self) -> None:
        try:
            found = await trio.to_thread.run_sync(pinrecords.read, self.path)
        except OSError as exc:
            self._unusable(f"cannot read it: {exc.strerror or exc}")
            return
        if found is None:
            return
        try:
            self.review.pins, self._sections = pinrecords.loaded(self.path, *found)
        except BadPins as exc:
            aside = self.path + ".unreadable"
            with contextlib.suppress(OSError):
                os.replace(self.path, aside)
            self._unusable(f"{exc} (kept as {aside})")

    def _unusable(self, why: str) -> None:
        self.review.hold_unapproved = True
        logger.error(
            "pins: %s; every server is held until `mcpd approve` (or `mcpd pins import`)",
            why,
            extra=log_extra(None, "state_file", why),
        )

    def changed(self) -> None:
        self._paced.changed()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._paced.run(self.flush)

    async def flush(self) -> bool:
        """Write the pins now; whether they are on disk."""
        async with self._writing:
            self._paced.begin()
            servers = {alias: s.copy() for alias, s in self.review.pins.servers.items()}
            unwritten = self.review.unwritten.take()
            try:
                self._sections = await trio.to_thread.run_sync(
                    pinwriter.write, self.path, servers, unwritten, self._sections
                )
            except (OSError, BadPins) as exc:
                self.review.unwritten.give_back(unwritten)
                self._paced.failed()
                self._failed("cannot save the pins to", exc)
                return False
        self._paced.done(self._sections.file[1])
        self._last_error = None
        return True

    def _failed(self, doing: str, exc: Exception) -> None:
        if str(exc) != self._last_error:
            self._last_error = str(exc)
            logger.error(
                "%s %s: %s",
                doing,
                self.path,
                exc,
                extra=log_extra(None, "state_file", str(exc)),
            )

    def stored(self, wanted: list[Wanted]) -> Found:
        """The definitions of these pins that the file holds, read now (a held item is
        shown as approved from the moment it is held): from their servers' parts."""
        try:
            return pinrecords.definitions(self.path, self._sections, wanted)
        except (OSError, BadPins) as exc:
            self._failed("cannot read the pins approved from", exc)
            return {}

    # -- what the commands ask --

    def pending(self, only: str | None = None) -> list[dict[str, Any]]:
        return [_pending(p, self.review.pins) for p in self.review.pending(only)]

    def waiting(self) -> list[Pending]:
        """What waits, in the order of ``pending``, each definition as its canonical
        JSON: for a view that reads no more of them than it shows."""
        return self.review.pending()

    def findings(self, only: str | None = None) -> list[dict[str, Any]]:
        return [
            {"server": alias, "kind": kind, "name": name, **msgspec.to_builtins(f)}
            for alias, kind, name, found in self.review.found(only)
            for f in found
        ]

    async def approve(
        self, alias: str, picks: list[tuple[HeldKind, str, str]] | None, whole: bool = False
    ) -> dict[str, Any]:
        """Approve what was shown (``picks``: kind, name, digest) or all that waits;
        ``whole``: the server too, once nothing of it waits."""
        if not self._configured(alias) and alias not in self.review.pins.servers:
            raise KeyError(alias)
        result = self.review.approve(alias, picks, whole)
        saved = await self.flush()
        self._rejudge(alias)
        for label in result.approved:
            logger.info("%s: %s approved", alias, label, extra=log_extra(alias, "approved", label))
        return {**msgspec.to_builtins(result), "saved": saved}

    async def export(self, aliases: list[str] | None = None) -> dict[str, Any]:
        """The pins of these servers (all), with their definitions, as the file has
        them once everything is written."""
        if await self.flush():
            pins = await trio.to_thread.run_sync(pinrecords.exported, self.path, aliases)
        else:
            pins = self.review.export(aliases)
        out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(pins))
        return out

    async def import_pins(self, document: bytes, replace: bool) -> dict[str, Any]:
        pins = decode(document, "the imported pins")
        before = len(self.review.pending())
        count = self.review.import_pins(pins, replace)
        saved = await self.flush()
        for alias in pins.servers:
            self._rejudge(alias)
        logger.info(
            "pins imported: %d items of %s",
            count,
            ", ".join(sorted(pins.servers)) or "no server",
            extra=log_extra(None, "approved"),
        )
        return {
            "servers": sorted(pins.servers),
            "items": count,
            "released": max(0, before - len(self.review.pending())),
            "saved": saved,
        }


def _pending(p: Pending, pins: Pins) -> dict[str, Any]:
    # Held as maybe forgotten: how many names the server had mcpd forget, so that a
    # person can tell a chance match (many) from a likely one (few).
    server = pins.servers.get(p.server)
    forgotten = {}
    if p.why == "forgotten" and server is not None:
        forgotten["forgotten_names"] = server.forgotten_names()
    return {
        "server": p.server,
        "kind": p.kind,
        "name": p.name,
        "why": p.why,
        "reason": held_reason(p.why, p.server, p.rules),
        "rules": p.rules,
        "digest": p.offered.digest,
        "offered": msgspec.json.decode(p.offered.definition),
        "approved": None if p.approved is None else msgspec.json.decode(p.approved.definition),
        **forgotten,
    }
