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
form whose content does not say "approve".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from protocol import mcp
from protocol.visible import visible

from .approvals import ApprovalRequest, Verdict

METHOD: Final = "elicitation/create"
APPROVE: Final = "approve"
DENY: Final = "deny"
BY_AGENT: Final = "the agent's user"
# How much of the arguments a person is shown in the question.
SHOWN_ARGUMENTS: Final = 2000
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


def question(request: ApprovalRequest) -> str:
    """The text the user reads."""
    shown = visible(request.arguments)
    if len(shown) > SHOWN_ARGUMENTS:
        shown = shown[:SHOWN_ARGUMENTS] + f"… ({len(shown) - SHOWN_ARGUMENTS} more)"
    name = visible(request.original)
    if len(name) > SHOWN_NAME:
        name = name[:SHOWN_NAME] + f"… ({len(name) - SHOWN_NAME} more characters)"
    why = f" ({visible(request.reason)})" if request.reason else ""
    return (
        f"mcpd asks before this call{why}.\n"
        f"Tool: {visible(request.tool)} on the server '{visible(request.server)}', "
        f"which calls it {name}\n"
        f"Arguments: {shown}\n"
        "Approve it to send it to the server, or deny it."
    )


def elicitation_params(request: ApprovalRequest, version: str) -> dict[str, Any]:
    """The params of the ``elicitation/create`` that asks the agent's user, for an
    agent that speaks protocol ``version``."""
    params: dict[str, Any] = {"message": question(request), "requestedSchema": SCHEMA}
    if version not in _WITHOUT_MODE:
        params = {"mode": "form", **params}
    return params


def input_request(request: ApprovalRequest, version: str) -> dict[str, Any]:
    """The entry of ``inputRequests`` that asks a modern agent's user."""
    return {"method": METHOD, "params": elicitation_params(request, version)}


def input_required(key: str, request: ApprovalRequest, state: str, version: str) -> dict[str, Any]:
    """The ``input_required`` result that asks a modern agent's user; its retry
    brings the answer under ``key`` in ``inputResponses`` and ``state`` back."""
    return {
        "resultType": mcp.INPUT_REQUIRED,
        "inputRequests": {key: input_request(request, version)},
        "requestState": state,
    }


class _Answer(msgspec.Struct):
    action: str
    content: dict[str, Any] | None = None


def verdict_of(answer: bytes | msgspec.Raw | Mapping[str, object]) -> Verdict:
    """The user's answer (an ``ElicitResult``, raw JSON or decoded) as a verdict."""
    try:
        if isinstance(answer, bytes | msgspec.Raw):
            parsed = msgspec.json.decode(answer, type=_Answer)
        else:
            parsed = msgspec.convert(answer, _Answer)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Verdict("denied", BY_AGENT, "the agent's answer could not be read")
    if parsed.action == "decline":
        return Verdict("denied", BY_AGENT, "declined")
    if parsed.action != "accept":
        return Verdict("denied", BY_AGENT, "dismissed without a decision")
    content = parsed.content or {}
    given = content.get("reason")
    reason = (given.strip()[:500] or None) if isinstance(given, str) else None
    if content.get("decision") == APPROVE:
        return Verdict("approved", BY_AGENT, reason)
    return Verdict("denied", BY_AGENT, reason or "denied")
