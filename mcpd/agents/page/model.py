"""What the page shows, from what the daemon already answers.

``mcpd status`` (the ``StatusDocument`` the daemon builds) gives the servers, the
daemon and the profiles; the histories give the day's state changes and the hour's
minutes; the logins say which servers wait for a person.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ...registry.profiles.views import ProfileView
from ...servers.shared import ServerHistory
from ...status_document import ProfileStatus, StatusDocument
from ..daemon_seam import DaemonForAgents
from .sources import (
    ALL_CALLS,
    NO_SOURCES,
    CallFilter,
    CallRow,
    HeldChange,
    PendingApproval,
    Sources,
    Waiting,
)


class PageData(msgspec.Struct, frozen=True):
    """Everything one rendering of the page reads, as of ``now`` (Unix time)."""

    status: StatusDocument
    history: dict[str, ServerHistory]
    now: float
    # Whether the reader may act (a session's page, with its CSRF token); on the socket
    # without a session the page is for reading.
    csrf: str | None = None
    # Whether logins start from this page (the endpoint's, for a reader who may act):
    # the browser has to come back to it from the authorization server.
    logins_from_page: bool = False
    # What ``sources`` gave; None: this mcpd does not record it, and the page says nothing.
    approvals: Waiting[PendingApproval] | None = None
    held: Waiting[HeldChange] | None = None
    calls: list[CallRow] | None = None
    call_filter: CallFilter = CallFilter()
    # Why this session decides nothing of an agent's (``opener.look_only``); None: it
    # was opened apart from every agent.
    look_only: str | None = None


class PageReader(msgspec.Struct, frozen=True):
    """Who reads the page and what of it: all that a drawing of the page depends on
    besides the daemon (``read_page``'s arguments but the time)."""

    scope: ProfileView | None
    # Whether the reader is the daemon's own user or root, who read each server's
    # stderr, pid and home (``DaemonForAgents.status``).
    own_user: bool = False
    call_filter: CallFilter = CallFilter()
    csrf: str | None = None
    logins_from_page: bool = False
    look_only: str | None = None


def read_page(
    control: DaemonForAgents,
    scope: ProfileView | None,
    now: float,
    *,
    own_user: bool = False,
    sources: Sources = NO_SOURCES,
    call_filter: CallFilter = ALL_CALLS,
    csrf: str | None = None,
    logins_from_page: bool = False,
    look_only: str | None = None,
) -> PageData:
    status = control.status(scope, own_user=own_user)
    history = {h.server: h for h in control.history(scope)}
    return PageData(
        status,
        history,
        now,
        csrf,
        logins_from_page,
        approvals=None if sources.approvals is None else sources.approvals(scope),
        held=None if sources.held is None else sources.held(scope),
        calls=None if sources.calls is None else sources.calls(scope, call_filter),
        call_filter=call_filter,
        look_only=look_only,
    )


def profile_use(profiles: list[ProfileStatus]) -> Callable[[str], list[str]]:
    """Which profiles other than the default one list a server's tools."""
    by_server: dict[str, list[str]] = {}
    for p in profiles:
        if p.name == "default":
            continue
        for alias in p.servers:
            by_server.setdefault(alias, []).append(p.name)
    return lambda alias: by_server.get(alias, [])
