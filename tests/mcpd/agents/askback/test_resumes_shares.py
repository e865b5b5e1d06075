"""The rounds kept for modern agents' retries are shared out by user (``resumes``):
another user's processes, however many and however short-lived, cannot push out the
round an agent of mcpd's own user (or of a third user) waits on for its person."""

from __future__ import annotations

import json
import os

from msgspec import Raw

from mcpd.agents.agent import NO_ONE, AgentCall
from mcpd.agents.askback.resumes import KEPT_AT_MOST, PER_AGENT, Resumes
from mcpd.agents.entry.shares import count_shares
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo
from mcpd.servers.calling.calls import Call
from protocol.jsonrpc import messages as rpc
from tests.support.parts.routing import agent_call

OTHER = 65534 if os.getuid() != 65534 else 65533
ASKED = Raw(
    b'{"resultType":"input_required","requestState":"s-1",'
    b'"inputRequests":{"k":{"method":"roots/list"}}}'
)


def call(rid: int, state: str | None = None) -> AgentCall:
    """A call of the tool ``t`` with no arguments; ``state``: the one its retry brings."""
    out = Call(rid, "t", Raw(b"{}"), NO_ONE, None, alias="s")  # type: ignore[arg-type]
    if state is not None:
        out.request_state = Raw(json.dumps(state).encode())
        out.input_responses = Raw(b'{"k":{"roots":[]}}')
    return agent_call(out, profile="default", known=True)


def _token(resumes: Resumes, who: AgentInfo, rid: int) -> str:
    handed, failed = resumes.hand_on(ASKED, call(rid), who, None)
    assert isinstance(handed, dict) and not failed
    token = handed["requestState"]
    assert isinstance(token, str)
    return token


def _flood(resumes: Resumes, processes: int) -> str:
    """Another user's ``processes``, each at its own bound of rounds, none retried;
    the first process's first token."""
    tokens = [
        _token(resumes, AgentInfo(pid=10_000 + pid, uid=OTHER), rid)
        for pid in range(processes)
        for rid in range(PER_AGENT)
    ]
    return tokens[0]


def _continues(resumes: Resumes, token: str, who: AgentInfo) -> bool:
    retry = call(99, token)
    return not isinstance(resumes.take(retry, who, None), rpc.RPCError)  # type: ignore[arg-type]


def test_another_users_processes_do_not_push_out_the_owners_round() -> None:
    resumes = Resumes(clock=lambda: 0.0)
    owner = AgentInfo(pid=42, uid=os.getuid())
    token = _token(resumes, owner, 1)
    _flood(resumes, KEPT_AT_MOST // PER_AGENT + 1)
    assert _continues(resumes, token, owner)


def test_a_third_users_round_outlives_the_flood_too() -> None:
    resumes = Resumes(clock=lambda: 0.0)
    third = AgentInfo(pid=43, uid=OTHER - 1)
    token = _token(resumes, third, 1)
    _flood(resumes, KEPT_AT_MOST // PER_AGENT + 1)
    assert _continues(resumes, token, third)


def test_a_user_past_its_share_forgets_the_oldest_of_its_process_holding_the_most() -> None:
    """Far below all's bound, its share is what it keeps: its process holding the
    most gives up its oldest, and one of its processes holding few keeps its own."""
    resumes = Resumes(clock=lambda: 0.0)
    share = count_shares(DaemonConfig(), KEPT_AT_MOST).per_uid
    few = AgentInfo(pid=9_999, uid=OTHER)
    kept = _token(resumes, few, 0)
    oldest = _flood(resumes, share // PER_AGENT + 1)
    assert not _continues(resumes, oldest, AgentInfo(pid=10_000, uid=OTHER))
    assert _continues(resumes, kept, few)
