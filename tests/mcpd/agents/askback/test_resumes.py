"""The tokens of mcpd's that a modern agent's retry of an ``input_required`` brings
back (``resumes``), apart from a daemon: a call that can no longer go on as it went
still hands its state over in a token, and nothing but a token continues anything."""

from __future__ import annotations

import json

from msgspec import UNSET, Raw

from mcpd.agents.agent import NO_ONE, AgentCall
from mcpd.agents.askback.resumes import PREFIX, Resumes
from mcpd.policy.agent import AgentInfo
from mcpd.servers.calling.calls import Call
from protocol.jsonrpc import messages as rpc
from tests.support.parts.routing import agent_call

ASKED = Raw(
    b'{"resultType":"input_required","requestState":"s-1",'
    b'"inputRequests":{"k":{"method":"roots/list"}}}'
)
WHO = AgentInfo(pid=42)


def call(rid: int, state: object = UNSET, responses: object = UNSET) -> AgentCall:
    out = Call(rid, "t", Raw(b"{}"), NO_ONE, None, alias="s")  # type: ignore[arg-type]
    if state is not UNSET:
        out.request_state = Raw(json.dumps(state).encode())
    if responses is not UNSET:
        out.input_responses = Raw(json.dumps(responses).encode())
    return agent_call(out, profile="default", known=True)


def test_a_call_that_cannot_go_on_as_it_went_still_hands_on_a_token() -> None:
    """Its tool or the rules changed before the server's answer came (no ``Sent``): the
    agent gets a token all the same, whose retry is a call of its own, once."""
    resumes = Resumes(clock=lambda: 0.0)
    handed, failed = resumes.hand_on(ASKED, call(1), WHO, None)
    assert isinstance(handed, dict) and not failed
    token = handed["requestState"]
    assert token.startswith(PREFIX)
    retry = call(2, token, {"k": {"roots": []}})
    assert resumes.take(retry, WHO, None) is None  # type: ignore[arg-type]
    assert retry.out.request_state == Raw(b'"s-1"')
    again = resumes.take(call(3, token, {"k": {"roots": []}}), WHO, None)  # type: ignore[arg-type]
    assert isinstance(again, rpc.RPCError) and "names no call" in again.message


def test_a_state_not_mcpds_is_left_out_with_its_answers() -> None:
    resumes = Resumes(clock=lambda: 0.0)
    for retry in [call(1, "s-1", {"k": {"roots": []}}), call(2, {"any": "json"})]:
        # A call of its own: what it brought continues nothing, and is not sent on.
        assert resumes.take(retry, WHO, None) is None  # type: ignore[arg-type]
        assert retry.out.request_state is UNSET and retry.out.input_responses is UNSET
    # Answers with no state continue no round: they go on as a first call's would.
    alone = call(3, responses={"k": {"roots": []}})
    assert resumes.take(alone, WHO, None) is None  # type: ignore[arg-type]
    assert alone.out.request_state is UNSET and alone.out.input_responses is not UNSET
