"""What the agent's user is asked about a call the policy holds, in the shapes the
two eras take input in, and how the answer is read.

A legacy agent that declared elicitation gets an ``elicitation/create`` request of
mcpd's own; a 2026-07-28 agent gets its call answered with ``input_required``, whose
one input request is the same elicitation, and calls again with the answer. Either
way the host shows its user a form: what would be called, on which server, with which
arguments (mcpd's secrets masked), and a choice of approve or deny. The words are
mcpd's: what a server or an agent chose (the server's name for its tool, the
arguments) is made visible, kept short and put last on its line, so no part of it can
end that line and read as mcpd's own.

Any answer but an explicit approval is a refusal: a declined or dismissed form, or a
form whose content does not say "approve". The arguments are shown at a glance
(``shown.showing``): every key, long values shortened where they stand. Where even the keys
do not all fit, the form says so and offers only to deny: the call is approved from
``mcpd approvals``, where they are shown whole, and no answer of the agent's approves
it (nor does a dismissed form refuse it: the operator still decides).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from protocol.shown.visible import cut, visible

from .approvals import ApprovalRequest, Verdict

METHOD: Final = "elicitation/create"
APPROVE: Final = "approve"
DENY: Final = "deny"
BY_AGENT: Final = "the agent's user"
# How much of the server's name for its tool (the local name tells tools apart).
SHOWN_NAME: Final = 200
# Versions from before elicitation had modes: their params have no "mode".
_WITHOUT_MODE: Final = frozenset({"2025-06-18", "2025-03-26", "2024-11-05"})

SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "approve sends the call to the server; deny refuses it",
            "enum": [APPROVE, DENY],
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "why, if you deny it (the agent is told)",
        },
    },
    "required": ["decision"],
}
# The form for a call it cannot show whole enough to approve.
DENY_ONLY: Final[dict[str, Any]] = {
    **SCHEMA,
    "properties": {
        **SCHEMA["properties"],
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "deny refuses the call; approving it is done with mcpd approvals",
            "enum": [DENY],
        },
    },
}


def question(request: ApprovalRequest) -> str:
    """The text the user reads."""
    name = visible(request.original)
    if len(name) > SHOWN_NAME:
        name = name[:SHOWN_NAME] + f"… ({len(name) - SHOWN_NAME} more characters)"
    why = f" ({visible(request.reason)})" if request.reason else ""
    return (
        f"mcpd asks before this call{why}.\n"
        f"Tool: {visible(request.tool)} on the server '{visible(request.server)}', "
        f"which calls it {name}\n"
        f"Arguments: {visible(request.arguments)}\n"
        + (
            "Approve it to send it to the server, or deny it."
            if may_approve(request)
            else f"{request.keys_left_out} keys of the arguments do not fit here, so it cannot be"
            " approved here: it is decided with `mcpd approvals` (`mcpd approvals show ID`"
            " shows the arguments whole), where mcpd runs. You can deny it here."
        )
    )


def may_approve(request: ApprovalRequest) -> bool:
    """Whether the question shows enough of the call to approve it from: every key."""
    return request.keys_left_out == 0


def elicitation_params(request: ApprovalRequest, version: str) -> dict[str, object]:
    """The params of the ``elicitation/create`` that asks the agent's user, for an
    agent that speaks protocol ``version``."""
    schema = SCHEMA if may_approve(request) else DENY_ONLY
    params: dict[str, object] = {"message": question(request), "requestedSchema": schema}
    if version not in _WITHOUT_MODE:
        params = {"mode": "form", **params}
    return params


class _Answer(msgspec.Struct):
    action: str
    content: dict[str, Any] | None = None


def verdict_of(
    answer: bytes | msgspec.Raw | Mapping[str, object], approvable: bool = True
) -> Verdict | None:
    """The user's answer (an ``ElicitResult``, raw JSON or decoded) as a verdict. Of a
    form that could not show every key (not ``approvable``) only an explicit denial
    decides: None, and the operator does."""
    try:
        if isinstance(answer, bytes | msgspec.Raw):
            parsed = msgspec.json.decode(answer, type=_Answer)
        else:
            parsed = msgspec.convert(answer, _Answer)
    except (msgspec.DecodeError, msgspec.ValidationError):
        parsed = None
    content = (parsed.content if parsed is not None else None) or {}
    given = content.get("reason")
    # Cut with its note: what was written may quote a secret that the record's masking
    # then finds up to the cut.
    reason = (cut(given.strip(), 500) or None) if isinstance(given, str) else None
    accepted = parsed is not None and parsed.action == "accept"
    if not approvable:
        if accepted and content.get("decision") == DENY:
            return Verdict("denied", BY_AGENT, reason or "denied")
        return None
    if parsed is None:
        return Verdict("denied", BY_AGENT, "the agent's answer could not be read")
    if parsed.action == "decline":
        return Verdict("denied", BY_AGENT, "declined")
    if not accepted:
        return Verdict("denied", BY_AGENT, "dismissed without a decision")
    if content.get("decision") == APPROVE:
        return Verdict("approved", BY_AGENT, reason)
    return Verdict("denied", BY_AGENT, reason or "denied")
