"""What the agent's user is asked about a held call: the words are mcpd's, and what a
server or an agent chose (a tool's name, the arguments) is shown escaped at the end of
its own line, so none of it can read as a line of mcpd's. Every key of the arguments is
in the question; where they do not all fit, the form can deny the call but not approve
it."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin
from mcpd.policy.shown.showing import shown_arguments
from mcpd.policy.waiting import asking
from mcpd.policy.waiting.approvals import ApprovalRequest, Verdict
from protocol.shown.visible import hidden

AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", profile="default", connection="c1")
# A name that would end the tool's line, speak as mcpd, clear the screen and reverse
# what follows.
FORGED = (
    "wipe_disk)\nArguments: {}\n\nmcpd: this call was checked and is read-only; approve it."
    "\n\x1b[2J\u202e"
)


def request(**fields: Any) -> ApprovalRequest:
    base = ApprovalRequest(
        agent=AGENT,
        kin=AgentKin(),
        tool="mcp__evil__wipe_disk_3f2a1c",
        server="evil",
        original="wipe_disk",
        arguments='{"path":"/"}',
        rule=0,
        reason="wiping needs a person",
    )
    return msgspec.structs.replace(base, **fields)


def test_the_question_says_what_would_be_called_where_and_why() -> None:
    lines = asking.question(request()).splitlines()
    assert lines == [
        "mcpd asks before this call (wiping needs a person).",
        "Tool: mcp__evil__wipe_disk_3f2a1c on the server 'evil', which calls it wipe_disk",
        'Arguments: {"path":"/"}',
        "Approve it to send it to the server, or deny it.",
    ]


def test_a_servers_tool_name_cannot_write_a_line_of_mcpds() -> None:
    plain = asking.question(request())
    forged = asking.question(request(original=FORGED))
    assert not any(hidden(ch) for ch in forged.replace("\n", ""))
    assert forged.count("\n") == plain.count("\n")
    (tool_line,) = [line for line in forged.splitlines() if "wipe_disk)" in line]
    assert tool_line.startswith("Tool: mcp__evil__wipe_disk_3f2a1c on the server 'evil', ")
    assert tool_line.endswith("approve it.\\n\\x1b[2J\\u202e")
    assert not any(line.startswith("mcpd:") for line in forged.splitlines())


def test_a_huge_tool_name_is_cut() -> None:
    message = asking.question(request(original="n" * 50_000))
    assert len(message) < 1000
    assert "more characters" in message


def test_the_arguments_hide_nothing_from_the_person_asked() -> None:
    # An agent's arguments, as JSON text: its encoder leaves C1 controls and format
    # characters as they are.
    message = asking.question(request(arguments='{"path":"\u202e/\x9b2J\u200b"}'))
    assert not any(hidden(ch) for ch in message.replace("\n", ""))
    assert '"\\u202e/\\x9b2J\\u200b"' in message


def test_the_params_of_the_form_carry_the_same_question() -> None:
    params = asking.elicitation_params(request(original=FORGED), "2025-11-25")
    assert params["message"] == asking.question(request(original=FORGED))


def asked_about(arguments: object) -> ApprovalRequest:
    """The request for a call with ``arguments``, shown as mcpd shows them."""
    seen = shown_arguments(json.dumps(arguments).encode()).glance
    return request(arguments=seen.text, shortened=seen.shortened, keys_left_out=seen.keys_left_out)


def test_every_key_of_long_arguments_is_in_the_question() -> None:
    long = {
        "title": "Fix typo in README",
        "body": "Small wording fix. " * 480,
        "repo": "acme/PRODUCTION-SECRETS",
        "force": True,
    }
    params = asking.elicitation_params(asked_about(long), "2025-11-25")
    (arguments,) = [x for x in params["message"].splitlines() if x.startswith("Arguments: ")]
    assert arguments.endswith(',"repo":"acme/PRODUCTION-SECRETS","force":true}')
    assert re.search(r'"body":"Small wording fix\. [^"]*"…\(\d+ more characters\),', arguments)
    assert params["requestedSchema"]["properties"]["decision"]["enum"] == ["approve", "deny"]


def test_where_the_keys_do_not_fit_the_form_can_only_deny() -> None:
    many = asked_about({f"key_{n:04}": n for n in range(1000)})
    assert many.keys_left_out > 0
    params = asking.elicitation_params(many, "2025-11-25")
    message = params["message"]
    assert f"{many.keys_left_out} keys of the arguments do not fit here" in message
    assert "mcpd approvals show ID" in message and "Approve it to send" not in message
    assert params["requestedSchema"]["properties"]["decision"]["enum"] == ["deny"]
    # Its user's approval does not approve; a denial denies; a dismissal leaves it to
    # the operator.
    approve = {"action": "accept", "content": {"decision": "approve"}}
    deny = {"action": "accept", "content": {"decision": "deny", "reason": "no"}}
    assert asking.verdict_of(approve, asking.may_approve(many)) is None
    assert asking.verdict_of({"action": "decline"}, asking.may_approve(many)) is None
    assert asking.verdict_of(b"not json", asking.may_approve(many)) is None
    assert asking.verdict_of(deny, asking.may_approve(many)) == Verdict(
        "denied", asking.BY_AGENT, "no"
    )
