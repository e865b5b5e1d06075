"""The audit log: every record in ``calls.jsonl`` in the state directory, one JSON
line each, and (unless ``audit_journal = false``) a journal entry each, within a budget.

The call path never waits for it: ``record`` cuts the record's texts to what any record
may hold (``record.bound``), counts it for the metrics, keeps it among the latest
(``recent``, which the status page reads) and appends it to a bounded buffer. A writer
task (``run``) wakes when the buffer is no longer empty, lets a moment's records gather
(or fewer, when a batch's worth have come sooner), and hands them to a worker thread,
which works out the digests of their arguments and writes the file and the journal
(within the journal's budget: see ``journal``). With ``audit_arguments``, the arguments
themselves are masked and kept there too (``arguments``). The buffer holds a copy of the
arguments for that: of short ones (``DIGESTED_LATER``) for their digest, as many as it
holds records; of those to be kept, up to ``HELD_ARGUMENTS`` bytes. Past that, and for
longer arguments, a record's are worked out as it is made, and arguments too large to
keep are never copied. Once written, the records kept in memory let go of theirs. When
the buffer is full (the disk or journald fell behind), a record is counted and dropped,
never waited for: one of the user holding the most records in it, of its process holding
the most (``shares``); the next write puts a ``Gap`` line in the file with how many were
dropped, and a warning in the log. What is still buffered when the daemon stops is
written before it exits (``flush``, under a shield), unless a write the disk holds keeps
it waiting past a bound: that one is given up on. A batch the file cannot take (a full
disk) is not held for later: the next batch it takes begins with a ``Gap`` line of how
many calls' records were lost, and when (``lost``).

Requests mcpd refused before any server or rule saw them come through ``unrouted``:
past their agent's budget (or its user's), they never reach the buffer, and each batch
writes one summary per agent of how many there were (``summed``).

The file is rotated when the next line would take it past ``audit_max_bytes``, keeping
``audit_files`` files (``logfile``). It is opened for appending, so a restart adds to
what is there, and is private (0600), in a directory no other user can write to, never
through a symbolic link; a file there that is not one mcpd made gets no record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from itertools import chain
from typing import Final

import msgspec
import trio
from msgspec import UNSET

from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ..config.tables.model import DaemonConfig
from ..local.state.unsaved import SaveWatch
from ..policy.redaction.guard import SecretGuard
from ..policy.redaction.masking import KnownSecrets, SecretSet
from . import journal
from .arguments import MAX_KEPT, kept_arguments, too_large
from .counts import CallCounts
from .logfile import FILE_NAME, LogFile
from .lost import Lost, spans
from .record import (
    STOPPED,
    CallRecord,
    Gap,
    bound,
    digest,
    iso,
    mask_texts,
    set_digests,
    shown_lines,
    stamp,
)
from .shares import Shares
from .summed import Summed, finish

BUFFER: Final = 8192  # records waiting to be written
RECENT: Final = 500  # the latest records kept in memory, for the status page
# Arguments the buffer holds for the writer to mask and keep (``audit_arguments``), at
# most: past it (the writer is behind), a record's are worked out at once.
HELD_ARGUMENTS: Final = 16 * 1024 * 1024
# How long the writer lets records gather once one is waiting: one hand-over to the
# worker thread for a burst of calls, not one for each.
GATHER: Final = 0.2
# How many records gathered make the writer go at once, without waiting the rest of
# GATHER: enough to share a hand-over among many, few enough that the records are
# still in the processor's cache when the worker reads them.
BATCH: Final = 512
# The longest arguments whose digest waits for the writer when they are not kept: for
# short ones, most of a digest's cost on the call path is bringing the hash's code and
# state back into the processor's cache, which a batch pays once; for long ones it is
# the hashing itself, and a copy for the writer would only add to it.
DIGESTED_LATER: Final = 1024

# The arguments' JSON as the agent sent it (a view into what was read, kept only until
# the record is written).
Arguments = bytes | msgspec.Raw

logger = logging.getLogger("mcpd.audit")
_encoder: Final = msgspec.json.Encoder()


class AuditLog:
    def __init__(
        self,
        directory: str | None,
        settings: DaemonConfig,
        secrets: KnownSecrets | None = None,
        capacity: int = BUFFER,
        clock: Callable[[], float] = time.monotonic,
        guard: SecretGuard | None = None,
    ) -> None:
        """``directory``: where ``calls.jsonl`` goes (None: no file, journal only);
        ``secrets``: what is masked in the arguments kept with ``audit_arguments``;
        ``clock``: what the agents' budgets for requests refused at once are kept by;
        ``guard``: what masks the secrets mcpd holds in the records' texts, as in every
        line mcpd logs."""
        self.directory = directory
        self.secrets = secrets or KnownSecrets()
        self._guard = guard
        self.capacity = capacity
        self.counts = CallCounts()
        self.written = 0
        # The daemon is stopping: the calls it cuts short say so, where they would
        # otherwise read as their agents' doing (``cancelled``).
        self.stopping = False
        self._buffer: list[CallRecord] = []
        # Records of the buffer whose arguments' digest (and, with ``audit_arguments``,
        # masked copy) is still to be worked out, with a copy of them.
        self._to_digest: list[tuple[CallRecord, bytes]] = []
        self._recent: deque[CallRecord] = deque(maxlen=RECENT)
        self._writing = trio.Lock()
        self._idle = trio.Event()  # no write is under way in a worker thread
        self._idle.set()
        self._watchers: list[Callable[[], None]] = []
        self._dropped = 0  # since the last write
        self._held = 0  # bytes of arguments in the buffer
        self._room = HELD_ARGUMENTS  # what the batch being written leaves of it
        self._wake = trio.Event()
        self._full = trio.Event()
        self._file = None if directory is None else LogFile(directory)
        self._lost = Lost()  # calls whose records the file could not take
        self.saving = SaveWatch("audit log", "calls since are not recorded in it")
        self._dropped_warning = Throttle(burst=1, every=60.0)
        self._journal = journal.CallJournal()
        self._summed = Summed(clock)
        self._shares: Shares | None = None  # while the buffer is full
        self.configure(settings)

    def configure(self, settings: DaemonConfig) -> None:
        """The ``[daemon]`` audit keys in force (at start and after each reload)."""
        self.to_file = settings.audit and self.directory is not None
        self.to_journal = settings.audit_journal
        self._writes = self.to_file or self.to_journal  # anywhere
        self.arguments_kept = settings.audit_arguments
        self.max_bytes = settings.audit_max_bytes
        self.files = settings.audit_files

    @property
    def path(self) -> str | None:
        return None if self.directory is None else os.path.join(self.directory, FILE_NAME)

    # -- the call path's side --

    def record(self, record: CallRecord, arguments: Arguments | None = None) -> None:
        """Count ``record`` and queue it for writing, with the ``arguments`` the agent
        sent (their digest is worked out off the call path); never blocks."""
        bound(record)
        if self.stopping and record.outcome == "cancelled":
            record.reason = STOPPED
        self.counts.add(record)
        self._recent.append(record)
        if not self._writes:
            return
        buffer = self._buffer
        waiting = len(buffer)
        if waiting >= self.capacity and not self._make_room(record):
            return
        if arguments:
            if self.arguments_kept:
                self._keep(record, arguments)
            elif len(arguments) <= DIGESTED_LATER:
                # A copy: not the whole read the arguments are a view of.
                self._to_digest.append((record, bytes(arguments)))
            else:
                record.args_digest = digest(arguments)
        buffer.append(record)
        waiting += 1
        if waiting == 1:  # the first since the last write wakes the writer
            self._wake.set()
        elif waiting == BATCH:
            self._full.set()

    def unrouted(self, record: CallRecord, arguments: Arguments | None = None) -> None:
        """A request mcpd refused before any server or rule saw it: queued as ``record``
        queues it, within its agent's budget; past it, counted in the agent's summary."""
        if not self._writes or self._summed.within_budget(record):
            self.record(record, arguments)
            return
        bound(record)
        self.counts.add(record)
        self._recent.append(record)
        if self._summed.add(record):  # the first summary since the last write
            self._wake.set()

    def _make_room(self, record: CallRecord) -> bool:
        """The buffer is full: whether ``record`` takes the place of another agent's."""
        if self._shares is None:
            self._shares = Shares(self._buffer)
        self._dropped += 1
        self.counts.dropped += 1
        return self._shares.make_room(record)

    def _keep(self, record: CallRecord, arguments: Arguments) -> None:
        """With ``audit_arguments``: ``arguments`` left to the writer to mask and keep,
        within what the buffer may hold; else worked out now."""
        size = len(arguments)
        held = self._held + size
        if size <= MAX_KEPT and held <= self._room:
            self._to_digest.append((record, bytes(arguments)))
            self._held = held
            return
        record.args_digest = digest(arguments)
        if size > MAX_KEPT:  # nothing of them is kept: none are copied
            record.arguments = too_large(size)
        else:  # the writer is behind: no more bytes are held for it
            record.arguments = kept_arguments(arguments, self.secrets.current())

    def watch(self, written: Callable[[], None]) -> None:
        """``written()`` after each batch of records is written (the status page's
        latest calls): at most one call a batch, never one a record."""
        self._watchers.append(written)

    def recent(self, keep: Callable[[CallRecord], bool], limit: int) -> list[CallRecord]:
        """The latest records ``keep`` admits, newest first, at most ``limit``: copies,
        mcpd's secrets masked in their texts as the writer masks them (the records kept
        are masked only once written, and never with no file or journal to write)."""
        out: list[CallRecord] = []
        for record in reversed(self._recent):
            if keep(record):
                out.append(record)
                if len(out) >= limit:
                    break
        guard = self._guard
        if guard is None:
            return out
        shown = [msgspec.structs.replace(record) for record in out]
        for record in shown:
            mask_texts(record, guard.mask_quietly)
        return shown

    # -- the writer --

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.to_file:
            # Opened now, not at the first call: a file that cannot be written is said
            # at start, and the daemon holds the same descriptors before and after calls.
            await trio.to_thread.run_sync(self._append, b"", 0)
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                with trio.move_on_after(GATHER):
                    await self._full.wait()
                await self.flush()
        finally:
            with trio.move_on_after(5, shield=True):
                await self.flush()

    async def flush(self) -> None:
        """Write what is waiting (in a worker thread: the event loop never waits for
        the disk or journald)."""
        async with self._writing:
            # One write at a time, in order: one given up on (below) is waited for.
            await self._idle.wait()
            self._wake, self._full = trio.Event(), trio.Event()
            batch, self._buffer, self._shares = self._buffer, [], None
            to_digest, self._to_digest = self._to_digest, []
            dropped, self._dropped = self._dropped, 0
            self._room, self._held = HELD_ARGUMENTS - self._held, 0
            summaries = self._summed.take()
            if batch or dropped or summaries:
                # The secrets as they are now, taken here: their sources read the
                # daemon's state, which only this thread may.
                secrets = self.secrets.current() if self.arguments_kept else None
                idle = self._idle = trio.Event()
                token = trio.lowlevel.current_trio_token()

                def write() -> None:
                    try:
                        self._write(batch, to_digest, dropped, summaries, secrets)
                    finally:
                        with contextlib.suppress(trio.RunFinishedError):
                            trio.from_thread.run_sync(idle.set, trio_token=token)

                try:
                    # A write the disk holds (a hung mount, a full journald) is given up
                    # on when the daemon stops, which it does within its deadline.
                    await trio.to_thread.run_sync(write, abandon_on_cancel=True)
                finally:
                    self._room = HELD_ARGUMENTS
                for written in self._watchers:
                    written()

    def close(self) -> None:
        """The daemon stops: the file is closed (``flush`` first), and the journal told
        how many calls it did not get one by one; a write still under way keeps the
        file open until the process ends."""
        if self._idle.is_set():
            self._close()
        if self.to_journal:
            self._journal.summarize()

    def _write(
        self,
        records: list[CallRecord],
        to_digest: list[tuple[CallRecord, bytes]],
        dropped: int,
        summaries: list[CallRecord],
        secrets: SecretSet | None,
    ) -> None:
        now = time.time()
        stamp(records)
        if to_digest:
            waiting, copies = zip(*to_digest, strict=True)
            set_digests(waiting, copies)
            if secrets is not None:
                for record, arguments in to_digest:
                    record.arguments = kept_arguments(arguments, secrets)
        if summaries:
            finish(summaries)
        lines = _encoder.encode_lines(records) + _encoder.encode_lines(summaries)
        guard = self._guard
        if guard is not None and (guard.in_written(lines) or guard.cut_in_written(lines)):
            # An agent chose the names it called (a tool's, a URI), and one may hold a
            # secret of mcpd's: its records, the journal's entries and the log's lines
            # show the marker instead. A text cut where the record was made may end
            # with a secret's beginning: that is masked too. The batch's lines were
            # searched at once; only a batch that holds one, or a cut, is looked at
            # record by record.
            for record in chain(records, summaries):
                mask_texts(record, guard.mask_quietly)
            lines = _encoder.encode_lines(records) + _encoder.encode_lines(summaries)
        if secrets is not None:
            # Written: the latest records kept in memory need them no more.
            for record in records:
                record.arguments = UNSET
        if summaries:
            self._summed.warn(summaries)
        if dropped:
            gap = Gap(time=iso(now), ts=now, dropped=dropped)
            lines += _encoder.encode(gap) + b"\n"
            if self._dropped_warning.admit() is not None:
                logger.warning(
                    "%d audit records dropped: the audit log was not keeping up",
                    dropped,
                    extra=log_extra(None, "audit", "buffer full"),
                )
        filed: int | None = None  # how many of the records the file took (None: off)
        if self.to_file:
            lines, head = shown_lines(lines), self._lost.gap_line(now)
            count = len(records) + len(summaries) + (1 if dropped else 0) + (1 if head else 0)
            if self._append(head + lines, count):
                self._lost.said()
                filed = len(records)
            else:
                assert self._file is not None
                batch = spans(records, summaries, dropped, now)
                filed = min(self._lost.failed(head, lines, self._file.taken, batch), len(records))
        if self.to_journal:
            self._journal.write(records, now, filed)

    def _append(self, lines: bytes, count: int) -> bool:
        """``count`` JSON lines, each ending with a line feed, to the file: whether it
        took them."""
        assert self._file is not None
        try:
            self._file.append(lines, self.max_bytes, self.files)
        except OSError as exc:
            self.counts.write_errors += 1
            new_problem = self.saving.failed(self._file.path, str(exc))
            self._file.close()
            if new_problem:
                logger.warning(
                    "cannot write the audit log %s: %s",
                    self.path,
                    exc,
                    extra=log_extra(None, "audit", str(exc)),
                )
            return False
        self.written += count
        self.saving.saved()
        return True

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
