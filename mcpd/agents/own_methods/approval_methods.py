"""``mcpd/approvals/...``: the socket methods behind ``mcpd approvals``.

- ``mcpd/approvals/list``: the calls waiting for a person, oldest first, and the
  list's version;
- ``mcpd/approvals/show {id}``: one of them with its arguments whole (the list shows
  them at a glance);
- ``mcpd/approvals/decide {id, approve, reason?}``: approve or deny one of them;
- ``mcpd/approvals/watch {after, wait?}``: answers once the list changed since version
  ``after`` (or after ``wait`` seconds, at most a minute), with the list.

Deciding a call lets it reach a server (or stops it), and the list shows what agents
asked with which arguments: like ``mcpd/reload``, these are for the daemon's own user
and root, and only where the kernel says who is asking (a Unix socket, the daemon's
own: a profile's shows nothing outside it, ``profile_bound``), so that an agent given
the HTTP endpoint's token cannot approve its own calls. Neither can the
agent that made a call, a process it started, or one in its session
(``Approvals.decide``, ``policy.deciders.kin``), nor any other agent connected to mcpd in the
same way (``persons_only``): a call left to a person is no agent's to decide.
"""

from __future__ import annotations

from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import RequestContext
from protocol.shown.visible import cut

from ...approval_answers import ApprovalDecided, ApprovalShown, ApprovalsListing
from ...local.ownership.owners import user_name
from ...policy.waiting.approvals import ApprovalError
from ..agent import Agent
from .persons_only import refuse_an_agents_side
from .profile_methods import OwnMethod, ProfileMethods, owner_only

MAX_WAIT: Final = 60.0


class _Decide(msgspec.Struct):
    id: str
    approve: bool
    reason: str | None = None


class _Show(msgspec.Struct):
    id: str


class _Watch(msgspec.Struct):
    after: int = 0
    wait: float = MAX_WAIT


def _operator(conn: Agent, method: str) -> str:
    """Who is deciding, for the record; refuses anyone but the owner on a socket."""
    owner_only(conn, method)
    peer = conn.peer
    assert peer is not None  # the owner, on the socket
    return f"uid {peer.uid} ({user_name(peer.uid)})"


def _listing(api: ProfileMethods) -> ApprovalsListing:
    approvals = api.control.approvals
    return ApprovalsListing(approvals=approvals.list(), version=approvals.version)


async def _list(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _operator(conn, req.method)
    return _listing(api)


async def _show(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _operator(conn, req.method)
    params = rpc.decode_as(req.params, _Show)
    try:
        view, request = api.control.approvals.waiting(params.id)
    except ApprovalError as exc:
        raise rpc.RPCError(rpc.INVALID_PARAMS, str(exc)) from None
    # Written again from the arguments' bytes: for long ones, work the other agents'
    # calls need not wait for.
    whole = await trio.to_thread.run_sync(request.whole_arguments)
    return ApprovalShown(approval=view, arguments=whole)


async def _decide(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    by = _operator(conn, req.method)
    params = rpc.decode_as(req.params, _Decide)
    reason = (cut(params.reason.strip(), 500) or None) if params.reason else None
    assert conn.peer is not None
    decider = conn.peer.decider()
    agents = await api.agents_kin()

    def refuse_others() -> None:
        because = "an agent must not decide calls that wait for a person, its own or another's"
        refuse_an_agents_side(decider, agents, "deciding a call (mcpd approvals)", because)

    try:
        decided = api.control.approvals.decide(
            params.id, params.approve, by, reason, (decider,), refuse_others=refuse_others
        )
    except ApprovalError as exc:
        raise rpc.RPCError(rpc.INVALID_PARAMS, str(exc)) from None
    return ApprovalDecided(decided=decided, approved=params.approve, by=by)


async def _watch(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _operator(conn, req.method)
    params = rpc.decode_as(req.params, _Watch)
    with trio.move_on_after(max(0.0, min(params.wait, MAX_WAIT))):
        await api.control.approvals.wait_change(params.after)
    return _listing(api)


HANDLERS: dict[str, OwnMethod[ProfileMethods]] = {
    "mcpd/approvals/list": _list,
    "mcpd/approvals/show": _show,
    "mcpd/approvals/decide": _decide,
    "mcpd/approvals/watch": _watch,
}
