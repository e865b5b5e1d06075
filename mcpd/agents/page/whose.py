"""Whose connection a page's session, or a one-time code, is honoured on: the local user
who opened the session (who trades the code), on a connection none of whose processes
is one of mcpd's servers or descends from one (``holders``).

A browser sends a cookie of 127.0.0.1 to every port there: to another user's server,
and to a server of mcpd's own that serves a page on the host's loopback and gets it
opened. Such a server runs as mcpd's user, so the user alone does not tell it from the
browser; the processes that hold the connection do. Where who holds it cannot be told,
neither is honoured, and the refusal says why.
"""

from __future__ import annotations

from html import escape

from ...local.ownership.tcp_holder import HolderUnknown, ServerNotRuledOut
from ..entry.holders import ServerRefusals, servers_process
from ..entry.identity import Holder
from ..http.exchange import RequestSender
from ..http.wire import Reject
from .actions import refuse_action, refuse_page


async def connection_holder(
    caller: RequestSender, acting: bool, refusals: ServerRefusals, brought: str
) -> Holder:
    """Who holds ``caller``'s connection, where a session or a code (``brought``) may be
    honoured on it; else raises Reject, as JSON for an action (``acting``), else as a
    page: who holds it cannot be told, or a process of one of mcpd's servers does."""
    try:
        if caller.holder is None:
            raise HolderUnknown("mcpd was not told who is at its other end")
        held = await caller.holder.held()
    except HolderUnknown as exc:
        text = _unbound(exc)
        if acting:
            raise refuse_action(403, text) from None
        raise refuse_page(
            403,
            "mcpd cannot tell who is connecting",
            f"{escape(text[0].upper() + text[1:])}. The page opens in a browser on this machine.",
        ) from None
    if held.server is not None:
        refusals.refused(held, brought)
        text = servers_process(held)
        if acting:
            raise refuse_action(403, text)
        raise _not_for_servers(text)
    return held


def _unbound(exc: HolderUnknown) -> str:
    if isinstance(exc, ServerNotRuledOut):
        return (
            "a page's session is never taken on a connection of one of mcpd's servers, "
            f"and mcpd cannot tell this one from theirs: {exc}"
        )
    return (
        "a page's session is taken only from the local user who opened it, and mcpd "
        f"cannot tell which user holds this connection: {exc}"
    )


def _not_for_servers(text: str) -> Reject:
    return refuse_page(
        403,
        "Not for mcpd's servers",
        f"{escape(text[0].upper() + text[1:])}. A page's session, and the address from "
        "<code>mcpd dashboard</code>, are honoured only in a browser, on a connection "
        "that no process of mcpd's servers holds.",
    )
