"""One audit record: a ``tools/call``, ``prompts/get``, ``resources/read`` or
``completion/complete`` that an agent made, and what came of it.

Written as one JSON line in ``calls.jsonl`` (``log``); ``mcpd calls`` reads them back.
A record with a ``count`` stands for that many requests of one agent that mcpd refused
before any server or rule saw them, past the agent's budget for those (``summed``). A
``Gap`` line says how many records are missing before it: dropped because the writer
fell behind, or lost because the file could not take them (``lost``).
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import repeat
from operator import itemgetter, methodcaller
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from protocol.mcp.uri_templates import MAX_URI
from protocol.shown.visible import cut, visible_json

from ..policy.agent import AgentInfo

METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read", "completion/complete"})

# ok: the server answered; tool_error: a tool result with isError; refused: mcpd did
# not send it (policy, a held definition, an unknown name); outage: the server was
# unavailable; timeout: no answer in time; cancelled: the agent stopped waiting, or
# mcpd stopped first (its reason then ``STOPPED``); error: the server answered with a
# JSON-RPC error.
AuditOutcome = Literal["ok", "tool_error", "refused", "outage", "timeout", "cancelled", "error"]
STOPPED: Final = "mcpd was stopping"
# allow, deny and limited are the rules' (and their rates'); approved, denied and
# unanswered end an ask; ask is one the agent stopped waiting for; none: no rule was
# asked, mcpd answered the request itself first (an unknown or held name, arguments
# that are not an object, a search of its own), and nobody decided it.
NO_DECISION: Final = "none"


# Untracked by the cycle collector (a record is never part of a cycle): the records a
# burst of calls holds until they are written would otherwise set off collections.
class CallRecord(msgspec.Struct, kw_only=True, gc=False):
    time: str = ""  # ISO 8601, UTC, set from ``ts`` when the record is written
    ts: float  # Unix time the call arrived
    agent: AgentInfo
    method: str
    name: str | None = None  # what the agent asked for: a tool or prompt name, a URI
    original: str | None = None  # the server's own name for it
    server: str | None = None
    args_bytes: int = 0
    args_digest: str | None = None  # of the arguments as the agent sent them
    # The arguments themselves, with mcpd's secrets masked: only with audit_arguments.
    arguments: Any | UnsetType = UNSET
    decision: str = NO_DECISION
    # policy[N], default, the agent's user, uid N (name), ...; empty: nobody (none).
    decided_by: str = ""
    outcome: AuditOutcome
    reason: str | None = None  # why it was refused or failed
    # What the agent waited: from its request's arrival to the outcome, any wait for
    # the server to come up or for a slot included.
    duration_ms: float = 0.0
    result_bytes: int = 0
    # Only in a summary: how many requests it stands for (their sizes are added up), and
    # when the last of them came (``time`` and ``ts`` are the first's).
    count: int | UnsetType = UNSET
    last_time: str | UnsetType = UNSET
    last_ts: float | UnsetType = UNSET

    @property
    def failed(self) -> bool:
        return self.outcome != "ok"

    @property
    def calls(self) -> int:
        """How many requests the record stands for."""
        return 1 if self.count is UNSET else self.count


# Who a record is of, as the log tells agents apart when it shares out its room and its
# budget for requests refused at once: the process (its uid, pid and program), whichever
# of its connections, profiles and eras it used. Its user (the uid, first) is shared
# out to before its processes are.
ProcessKey = tuple[int | None, int | None, str | None]


def process_key(agent: AgentInfo) -> ProcessKey:
    return agent.uid, agent.pid, agent.exe


def mask_texts(record: CallRecord, mask: Callable[[str], str]) -> None:
    """``record``'s texts put through ``mask``: what the agent named (a tool, a URI an
    agent may write a secret of mcpd's into), the server's name for it, the reason,
    who decided, the agent's program and profile."""
    if record.name:
        record.name = mask(record.name)
    if record.original:
        record.original = mask(record.original)
    if record.reason:
        record.reason = mask(record.reason)
    record.decided_by = mask(record.decided_by)
    agent = record.agent
    exe, profile = mask(agent.exe or ""), mask(agent.profile)
    if exe != (agent.exe or "") or profile != agent.profile:
        record.agent = msgspec.structs.replace(agent, exe=exe or None, profile=profile)
    # A marker may be longer than the secret it stands for.
    bound(record)


class Gap(msgspec.Struct, kw_only=True):
    """Calls whose records are not in the file before it: ``dropped``, counted but never
    written (the buffer was full); ``lost``, written when the file could not take them
    (a full disk), with when the first and the last of those calls came. The line is
    written with the next batch the file takes."""

    time: str
    ts: float
    dropped: int = 0
    lost: int | UnsetType = UNSET
    first_time: str | UnsetType = UNSET
    first_ts: float | UnsetType = UNSET
    last_time: str | UnsetType = UNSET
    last_ts: float | UnsetType = UNSET


DIGEST: Final = 32  # hexadecimal digits of the SHA-256 kept

# What a record keeps of a name an agent chose that names something mcpd knows (a URI
# routed to a server) and of a reason that may quote one: whole up to NAME_KEPT
# characters, a length no real name reaches (mcpd matches no longer URI against a
# template: people and servers write none so long); past it, its first NAME_SHOWN
# characters and how many more there were. A name that names nothing mcpd knows is kept
# whole only up to NAME_SHOWN (``unknown``): a made-up name then costs the record, the
# latest records kept in memory, the journal and the file no more than a real one.
# Each cut is made with ``visible.cut``'s note: a cut made before the texts are masked
# can fall inside a secret, and masking takes what ends at such a note for the
# secret's beginning.
NAME_KEPT: Final = MAX_URI
NAME_SHOWN: Final = 256


def kept(text: str) -> str:
    """``text`` as a record keeps it (``NAME_KEPT``)."""
    return text if len(text) <= NAME_KEPT else _head(text)


def unknown(name: str) -> str:
    """A name that names nothing mcpd knows, as a record keeps it (``NAME_SHOWN``)."""
    return name if len(name) <= NAME_SHOWN else _head(name)


def _head(text: str) -> str:
    return cut(text, NAME_SHOWN)


def bound(record: CallRecord) -> None:
    """``record`` held to what any record may hold, whatever an agent or a server sent:
    each of its texts (what was named, the server's name for it, the reason, who
    decided, the agent's program and profile) as ``kept`` keeps it, saying so where it
    was cut; its arguments are kept up to ``arguments.MAX_KEPT`` where they are worked
    out. Applied where the log takes a record, before anything reads it: the file,
    the journal, the log's line, the latest records kept in memory and the page."""
    name, original, reason = record.name, record.original, record.reason
    if name is not None and len(name) > NAME_KEPT:
        record.name = _head(name)
    if original is not None and len(original) > NAME_KEPT:
        record.original = _head(original)
    if reason is not None and len(reason) > NAME_KEPT:
        record.reason = _head(reason)
    if len(record.decided_by) > NAME_KEPT:
        record.decided_by = _head(record.decided_by)
    agent = record.agent
    exe = agent.exe
    if (exe is not None and len(exe) > NAME_KEPT) or len(agent.profile) > NAME_KEPT:
        record.agent = msgspec.structs.replace(
            agent, exe=None if exe is None else kept(exe), profile=kept(agent.profile)
        )


def digest(arguments: bytes | msgspec.Raw) -> str:
    return hashlib.sha256(arguments).hexdigest()[:DIGEST]


def set_digests(records: Iterable[CallRecord], arguments: Iterable[bytes]) -> None:
    """Each record's ``args_digest``, of the arguments in the same place: a batch's, in
    C from end to end, with no Python run per record."""
    digests = map(_cut, map(_hexdigest, map(hashlib.sha256, arguments)))
    deque(map(setattr, records, repeat("args_digest"), digests), maxlen=0)


_hexdigest: Final = methodcaller("hexdigest")
_cut: Final = itemgetter(slice(DIGEST))


def iso(ts: float) -> str:
    """``ts`` as ``2026-08-01T10:00:00.123Z`` (rounded to the microsecond first, as
    datetime rounds it, then cut to the millisecond)."""
    second, milli = divmod(_millis(ts), 1000)
    return _seconds.text(second) + _MILLIS[milli]


def _millis(ts: float) -> int:
    # As datetime does: the fraction apart from the whole seconds (exact), rounded to
    # the microsecond half to even. ``ts`` times a million would be rounded first, to
    # the float nearest it, which at today's times lies a quarter microsecond away.
    fraction, whole = math.modf(ts)
    return int(whole) * 1000 + round(fraction * 1e6) // 1000


def stamp(records: list[CallRecord]) -> None:
    """Each record's ``time`` from its ``ts``, as ``iso`` puts it, in one pass over a
    batch (the records of a busy batch mostly share their millisecond, and the rest
    their second)."""
    text_of, millis, millis_of = _seconds.text, _MILLIS, _millis
    last, text = None, ""
    for record in records:
        ms = millis_of(record.ts)
        if ms != last:
            last = ms
            second, milli = divmod(ms, 1000)
            text = text_of(second) + millis[milli]
        record.time = text


# A second's fraction as the time's text ends: one of a thousand, made once.
_MILLIS: Final = tuple(f".{ms:03d}Z" for ms in range(1000))


class _Seconds:
    """The date and time of the last second formatted: records come many a second."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def text(self, second: int) -> str:
        if second != self._second:
            self._text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = second
        return self._text


_seconds: Final = _Seconds()


def shown_lines(lines: bytes) -> bytes:
    """``lines`` with each hidden character in their strings written as a ``\\uXXXX``
    escape, as ``mcpd calls`` shows them: the encoder leaves bidi controls, zero-width
    characters and DEL as they are, and one of those in a name an agent chose would
    reorder or hide the rest of its record for anyone reading the file in a terminal.
    What a program decodes from the lines is unchanged."""
    if lines.isascii() and b"\x7f" not in lines:  # most batches: nothing to look at
        return lines
    return b"\n".join(map(visible_json, lines.split(b"\n")))
