"""What the page shows of the decisions mcpd waits on, and of the calls it made: calls
waiting for someone's approval, server definitions held until someone approves the
change, and the latest calls of the audit log.

Each is one typed function that the daemon hands the page (``Sources``), reading what
the caller's profile may see (``scope``). A source that is None is something this mcpd
does not record: the page then leaves its section out, rather than say that nothing
waits. The rows are what the page draws, nothing more; the daemon's own records are
read into them where the source is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

import msgspec

from ...registry.views import ProfileView

Decision = Literal["approve", "deny"]


class PendingApproval(msgspec.Struct, frozen=True):
    """A call that waits for a person to let it through."""

    id: str
    server: str
    tool: str  # the agent-facing name
    agent: str  # who asked: "pid 4242 (claude), profile default"
    since: float  # Unix time
    arguments: str  # as shown to a person: secrets masked, cut to a few lines


class HeldChange(msgspec.Struct, frozen=True):
    """A server's changed definition of an item, held until a person approves it."""

    server: str
    kind: str  # tool | prompt | resource template
    name: str
    since: float
    diff: str  # what changed, as unified-diff lines


class CallRecord(msgspec.Struct, frozen=True):
    at: float
    server: str
    tool: str
    agent: str
    outcome: str  # ok | tool error | refused | outage | timeout | cancelled
    duration_ms: float | None = None


class CallFilter(msgspec.Struct, frozen=True):
    server: str | None = None
    outcome: str | None = None
    limit: int = 50


class Sources(msgspec.Struct, frozen=True):
    approvals: Callable[[ProfileView | None], list[PendingApproval]] | None = None
    # Returns what became of it, in words for the page.
    decide: Callable[[str, Decision, ProfileView | None], str] | None = None
    held: Callable[[ProfileView | None], list[HeldChange]] | None = None
    # (server, item name): the held change approved; returns what became of it.
    release: Callable[[str, str, ProfileView | None], str] | None = None
    calls: Callable[[ProfileView | None, CallFilter], list[CallRecord]] | None = None


# What the page has before anything records decisions or calls: none of it.
NO_SOURCES: Final = Sources()
ALL_CALLS: Final = CallFilter()
