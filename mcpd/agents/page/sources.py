"""What the page shows of the decisions mcpd waits on, and of the calls it made: calls
waiting for someone's approval, server definitions held until someone approves the
change, and the latest calls of the audit log.

Each is one typed function that the daemon hands the page (``Sources``), reading what
the caller's profile may see (``scope``). A source that is None is something this mcpd
does not record: the page then leaves its section out, rather than say that nothing
waits. The rows are what the page draws, nothing more; the daemon's own records are
read into them where the source is made.

What waits is shown a few at a time (``Waiting``): however many a server or the
agents make wait, the page draws the first of them, as the commands list them, and
says how many more there are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Generic, Literal, TypeVar

import msgspec

from ...registry.findings.rules import Finding
from ...registry.profiles.views import ProfileView
from .opener import Opener

T = TypeVar("T")
ApproveOrDeny = Literal["approve", "deny"]
# (id, decision, scope, who decides: who opened the session)
Decide = Callable[[str, ApproveOrDeny, ProfileView | None, Opener], Awaitable[str]]
# (server, kind, item name, digest, scope, who opened the session): the held change
# approved, if it is still the one the digest names.
Release = Callable[[str, str, str, str, ProfileView | None, Opener], Awaitable[str]]


# How many of what waits the page shows: the rest are named by their number.
APPROVALS_SHOWN: Final = 20
HELD_SHOWN: Final = 10


class Waiting(msgspec.Struct, Generic[T], frozen=True):
    """What waits of one kind: the first, and how many more there are."""

    first: list[T]
    more: int = 0


class PendingApproval(msgspec.Struct, frozen=True):
    """A call that waits for a person to let it through."""

    id: str
    server: str
    tool: str  # the agent-facing name
    agent: str  # who asked: "pid 4242 (claude), profile default"
    since: float  # Unix time
    arguments: str  # at a glance: secrets masked, every key shown where they fit
    shortened: bool = False  # a value is shortened where it stands
    keys_left_out: int = 0  # keys there was no room for: not to be approved from here


class HeldChange(msgspec.Struct, frozen=True):
    """A server's changed definition of an item, held until a person approves it."""

    server: str
    kind: str  # tool | prompt | template
    name: str
    reason: str  # why it is held, as the model is told
    diff: str  # what changed, as unified-diff lines (``helddiff``)
    since: float | None = None  # Unix time, where it is known
    digest: str = ""  # of what is offered: approving it approves exactly what was shown
    cut: bool = False  # the diff leaves part of the change out: not to be approved from here
    findings: tuple[Finding, ...] = ()  # what the finding rules flagged in what is offered


class CallRow(msgspec.Struct, frozen=True):
    """One call as the page lists it, from its audit record."""

    at: float
    server: str
    tool: str
    agent: str
    outcome: str  # ok | tool error | refused | outage | timeout | cancelled | error
    duration_ms: float | None = None


class CallFilter(msgspec.Struct, frozen=True):
    server: str | None = None
    outcome: str | None = None
    limit: int = 50
    # Only the calls of agents of this user: a reader other than the daemon's own user
    # and root sees no other user's (None: every user's).
    uid: int | None = None


class Sources(msgspec.Struct, frozen=True):
    """Each reads what the reader (``scope``) may see: None where it may see nothing of
    that kind (the page then says nothing of it either). The actions return what became
    of the decision, in words, or raise ``rpc.RPCError`` with why not."""

    approvals: Callable[[ProfileView | None], Waiting[PendingApproval] | None] | None = None
    decide: Decide | None = None
    held: Callable[[ProfileView | None], Waiting[HeldChange] | None] | None = None
    release: Release | None = None
    calls: Callable[[ProfileView | None, CallFilter], list[CallRow] | None] | None = None


# What the page has before anything records decisions or calls: none of it.
NO_SOURCES: Final = Sources()
ALL_CALLS: Final = CallFilter()
