"""``pins.json`` in the state directory: the definitions approved of every server's
tools, prompts and templates (``registry.pinning.definitions``), and what ``mcpd approve``, ``mcpd
tools --pending|--findings`` and ``mcpd pins export|import`` ask of them.

The file is read once at start-up, before any server lists anything, and rewritten
(whole and private: ``state.privatefile``) after each change: soon after for what mcpd pins
by itself (a first sight, a change taken under ``warn``; while such changes keep
coming, paced: ``state.write_pacing``), and before the command returns for what a person
approves or imports. Unlike the last known tools, pins are
not a cache: a file that cannot be read is set aside (``pins.json.unreadable``; a
later one beside it as ``pins.json.unreadable.2`` and so on, none written over), and
while one is kept there no server counts as approved until a person approves it
again, at this start and every later one, so a damaged file cannot let a changed
server through. The kept file is the mark of that on disk: it needs nothing written
(a full disk cannot lose it), and only the operator's word removes it
(``forget_unreadable``).

Only the digests stay in memory (``registry.pinning.digests``); the file is where the
definitions are (``pinrecords``). It is read again for the few a held item or a
command needs, and each rewrite (``pinwriter``) takes what did not change from the
file it replaces, and makes the rest from what the servers listed. If another
program changed the file while mcpd runs and it no longer holds a definition mcpd
pinned, the rewrite fails, says which, and leaves the file as it is (the next start
reads it).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from protocol.shown.logfields import log_extra

from ...registry.gating.judged import HeldKind, HeldOffer, held_reason
from ...registry.pinning.definitions import BadPins
from ...registry.pinning.digests import (
    FoundDefinitions,
    Pins,
    Unwritten,
    Wanted,
    pinned_definitions,
)
from ...registry.pinning.review import Review
from ..state.unsaved import SaveWatch
from ..state.write_pacing import PacedWrites
from . import pinrecords, pinwriter
from .pinanswers import Approved, FoundItem, HeldItem, PinsForgotten, PinsImported
from .pinrecords import Sections, decode

logger = logging.getLogger("mcpd.state")

FILE_NAME: Final = "pins.json"
ASIDE: Final = ".unreadable"  # what a file that cannot be read is renamed to, beside it


class PinKeeper:
    """Keeps ``review``'s pins in ``path``. ``rejudge(alias)`` puts a server's lists
    through the gate again (after an approval or an import) and tells agents;
    ``configured(alias)`` says whether a server of that alias is in the config;
    ``saving``, for ``mcpd status``, whether they are on disk now (an approval that
    cannot be saved holds in memory until mcpd stops)."""

    def __init__(
        self,
        path: str,
        review: Review,
        rejudge: Callable[[str], None],
        configured: Callable[[str], bool],
        holds_new: Callable[[str], bool] = lambda alias: False,
    ) -> None:
        self.path = path
        self.review = review
        self._rejudge = rejudge
        self._configured = configured
        self._holds_new = holds_new  # the server's ``hold_new_servers``
        self._paced = PacedWrites()
        self._writing = trio.Lock()
        self._sections: Sections | None = None  # where each server's part is in the file
        # What the write under way takes to the file: read from here until it is there.
        self._in_flight = Unwritten()
        self._last_error: str | None = None
        self._in_place = False  # a damaged file not moved aside yet: not to be written over
        self.saving = SaveWatch("pins", "approvals made since are kept in memory only")
        review.on_pinned = self.changed
        review.stored = self.stored

    # -- the file --

    async def load(self) -> None:
        kept = await trio.to_thread.run_sync(kept_aside, self.path)
        try:
            found = await trio.to_thread.run_sync(pinrecords.read_pin_file, self.path)
        except OSError as exc:
            self._unusable(f"cannot read it: {exc.strerror or exc}")
            return
        if found is not None:
            try:
                self.review.pins, self._sections = pinrecords.loaded(self.path, *found)
            except BadPins as exc:
                self._in_place = True
                try:
                    where = f"kept as {await self._set_aside()}"
                except OSError as moving:
                    where = f"not moved aside ({moving.strerror or moving}), nor written over"
                self._unusable(f"{exc} ({where})")
                return
        if kept:
            self._unusable(f"{', '.join(kept)} kept from a pin file that could not be read")

    async def _set_aside(self) -> str:
        """Moves the damaged file out of the way of the next write, beside those kept
        before; where it is now (``OSError``: it stays, and nothing is written)."""
        aside = await trio.to_thread.run_sync(set_aside, self.path)
        self._in_place = False
        return aside

    def _unusable(self, why: str) -> None:
        self.review.hold_unapproved = True
        logger.error(
            "pins: %s; each server not approved since is held until `mcpd approve ALIAS` "
            "(or `mcpd pins import`), at every start until `mcpd pins forget-unreadable`",
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
            try:
                if self._in_place:
                    await self._set_aside()
            except OSError as exc:
                self._paced.failed()
                self._failed("cannot move the unreadable pins aside from", exc)
                self.saving.failed(self.path, "see the journal")
                return False
            servers = {alias: s.copy() for alias, s in self.review.pins.servers.items()}
            unwritten = self._in_flight = self.review.unwritten.take()
            try:
                self._sections = await trio.to_thread.run_sync(
                    pinwriter.write_pins, self.path, servers, unwritten, self._sections
                )
            except (OSError, BadPins) as exc:
                self.review.unwritten.give_back(unwritten)
                self._paced.failed()
                self._failed("cannot save the pins to", exc)
                self.saving.failed(self.path, "see the journal")
                return False
            finally:
                self._in_flight = Unwritten()
        self._paced.done(self._sections.file[1])
        self._last_error = None
        self.saving.saved()
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

    def stored(self, wanted: list[Wanted]) -> FoundDefinitions:
        """The definitions of these pins that the file holds, read now (a held item is
        shown as approved from the moment it is held): from their servers' parts, or
        from what a write under way takes there."""
        return pinned_definitions(self.review.pins, self._in_flight, self._from_file, wanted)

    def _from_file(self, wanted: list[Wanted]) -> FoundDefinitions:
        try:
            return pinrecords.definitions_in_file(self.path, self._sections, wanted)
        except (OSError, BadPins) as exc:
            self._failed("cannot read the pins approved from", exc)
            return {}

    async def forget_unreadable(self) -> PinsForgotten:
        """The operator's word that the pins kept aside are to be forgotten: they are
        removed, and each server held for them is approved as it lists now, as at a
        first start (unless new servers are held anyway)."""
        kept = await trio.to_thread.run_sync(kept_aside, self.path)
        if self._in_place:
            await self._set_aside()
            kept = await trio.to_thread.run_sync(kept_aside, self.path)
        for path in kept:
            await trio.to_thread.run_sync(os.unlink, path)
        self.review.hold_unapproved = False
        waiting = sorted({p.server for p in self.review.pending() if p.why == "new_server"})
        approved = []
        for alias in waiting:
            if self._configured(alias) and not self._holds_new(alias):
                await self.approve(alias, None)
                approved.append(alias)
        logger.warning(
            "pins: %s forgotten by the operator; servers are approved by listing again "
            "(approved now: %s)",
            ", ".join(kept) or "no unreadable pin file",
            ", ".join(approved) or "none",
            extra=log_extra(None, "approved"),
        )
        return PinsForgotten(removed=kept, approved=approved)

    # -- what the commands ask --

    def knows(self, alias: str) -> bool:
        """Whether ``alias`` is a server of the config, or one the pins remember."""
        return self._configured(alias) or alias in self.review.pins.servers

    def pending(self, only: str | None = None) -> list[HeldItem]:
        return [_pending(p, self.review.pins) for p in self.review.pending(only)]

    def waiting(self) -> list[HeldOffer]:
        """What waits, in the order of ``pending``, each definition as its canonical
        JSON: for a view that reads no more of them than it shows."""
        return self.review.pending()

    def findings(self, only: str | None = None) -> list[FoundItem]:
        return [
            FoundItem(
                server=alias, kind=kind, name=name, rule=f.rule, where=f.where, excerpt=f.excerpt
            )
            for alias, kind, name, found in self.review.found(only)
            for f in found
        ]

    async def approve(
        self, alias: str, picks: list[tuple[HeldKind, str, str]] | None, whole: bool = False
    ) -> Approved:
        """Approve what was shown (``picks``: kind, name, digest) or all that waits;
        ``whole``: the server too, once nothing of it waits."""
        if not self.knows(alias):
            raise KeyError(alias)
        result = self.review.approve(alias, picks, whole)
        saved = await self.flush()
        self._rejudge(alias)
        for label in result.approved:
            logger.info("%s: %s approved", alias, label, extra=log_extra(alias, "approved", label))
        return Approved(
            approved=result.approved,
            stale=result.stale,
            unknown=result.unknown,
            whole_only=result.whole_only,
            saved=saved,
        )

    async def export(self, aliases: list[str] | None = None) -> dict[str, object]:
        """The pins of these servers (all), with their definitions, as the file has
        them once everything is written."""
        if await self.flush():
            pins = await trio.to_thread.run_sync(pinrecords.exported, self.path, aliases)
        else:
            pins = self.review.export(aliases)
        return msgspec.json.decode(msgspec.json.encode(pins), type=dict[str, object])

    async def import_pins(self, document: bytes, replace: bool) -> PinsImported:
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
        return PinsImported(
            servers=sorted(pins.servers),
            items=count,
            released=max(0, before - len(self.review.pending())),
            saved=saved,
        )


def kept_aside(path: str) -> list[str]:
    """The unreadable pin files kept beside ``path``, in the order they were kept."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder or ".")
    except FileNotFoundError:
        return []
    order = {n: _aside_number(name, n) for n in names}
    return [os.path.join(folder, n) for n in sorted(order, key=order.__getitem__) if order[n]]


def _aside_number(name: str, candidate: str) -> int:
    """Which of the files set aside from ``name`` ``candidate`` is (0: none)."""
    base = name + ASIDE
    if candidate == base:
        return 1
    tail = candidate.removeprefix(base + ".")
    numbered = tail != candidate and tail.isascii() and tail.isdigit() and tail[0] != "0"
    return int(tail) if numbered else 0


def set_aside(path: str) -> str:
    """Moves ``path`` to the first free name of the files set aside from it, never over
    one of them; that name."""
    kept = kept_aside(path)
    number = _aside_number(os.path.basename(path), os.path.basename(kept[-1])) if kept else 0
    aside = path + ASIDE + ("" if not number else f".{number + 1}")
    try:
        os.link(path, aside)  # fails rather than replace a file of that name
    except OSError as exc:
        if exc.errno == errno.EEXIST or os.path.lexists(aside):
            raise
        os.rename(path, aside)  # a file system without links: the name was free just now
        return aside
    os.unlink(path)
    return aside


def _pending(p: HeldOffer, pins: Pins) -> HeldItem:
    row = HeldItem(
        server=p.server,
        kind=p.kind,
        name=p.name,
        why=p.why,
        reason=held_reason(p.why, p.server, p.rules),
        rules=p.rules,
        digest=p.offered.digest,
        offered=msgspec.json.decode(p.offered.definition),
        approved=None if p.approved is None else msgspec.json.decode(p.approved.definition),
    )
    # Held as maybe forgotten: how many names the server had mcpd forget, so that a
    # person can tell a chance match (many) from a likely one (few).
    server = pins.servers.get(p.server)
    if p.why == "forgotten" and server is not None:
        row["forgotten_names"] = server.forgotten_names()
    return row
