"""Each request's audit record as the agent side makes it: the few words its outcome is
named with (and the reason kept, cut short), a request that ended without a reply
named as cancelled only when every part of it was, and one record per call, with the
agent's name for a tool and its server's, under the profile the agent had when it was
routed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import UNSET, Raw, UnsetType

from mcpd.agents.agent import AgentCall
from mcpd.agents.calls.callrecords import ID_IN_USE, CallRecords, Seen, ended, outcome_of
from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import CallRecord
from mcpd.policy.agent import AgentInfo
from mcpd.servers.status.outage import Outage
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.clients.agent import make_config, running
from tests.support.clients.answering import connect_answering
from tests.support.parts.calls import a_call, cancelled
from tests.support.parts.routing import StandInAgent, World, agent_call

AGENT = AgentInfo(uid=1000, pid=42, connection="c1")


@pytest.mark.parametrize(
    ("outcome", "failed", "words"),
    [
        (Raw(b"{}"), False, ("ok", None)),
        (Raw(b"{}"), True, ("tool_error", None)),
        (b"{}", False, ("ok", None)),
        (
            Outage("s", "timeout", "no answer within 5 s"),
            False,
            ("timeout", "no answer within 5 s"),
        ),
        (Outage("s", "open", "too many failures"), False, ("outage", "too many failures")),
        (rpc.RPCError(-32602, "bad arguments"), False, ("error", "bad arguments")),
        (mcp.CallToolResult([mcp.TextContent("found")]), False, ("ok", None)),
    ],
)
def test_each_outcome_is_named_in_a_few_words(
    outcome: object, failed: bool, words: tuple[str, str | None]
) -> None:
    assert outcome_of(outcome, failed) == words


def kept(name: str, arguments: Raw | UnsetType = UNSET) -> AgentCall:
    """A call of ``name`` as the agent side keeps it, routed nowhere yet."""
    return agent_call(a_call(name, arguments)[0])


def test_a_refusal_of_mcpds_own_says_its_first_text() -> None:
    result = mcp.CallToolResult(
        [{"type": "image", "data": ""}, {"type": "text", "text": "denied by policy[0]"}],
        isError=True,
    )
    assert outcome_of(result) == ("refused", "denied by policy[0]")
    assert outcome_of(mcp.CallToolResult([mcp.TextContent("held")], isError=True)) == (
        "refused",
        "held",
    )
    assert outcome_of(mcp.CallToolResult([{"type": "text", "text": 5}], isError=True)) == (
        "refused",
        None,
    )


def test_a_reason_is_cut_short() -> None:
    long = "x" * 1000
    assert outcome_of(rpc.RPCError(-32000, long)) == (
        "error",
        "x" * 200 + "… (and 800 more characters)",
    )
    refused = mcp.CallToolResult([mcp.TextContent(long)], isError=True)
    assert outcome_of(refused) == ("refused", "x" * 200 + "… (and 800 more characters)")
    huge = "y" * (1 << 20)
    assert outcome_of(Outage("s", "failed", huge)) == (
        "outage",
        "y" * 256 + f"… (and {(1 << 20) - 256} more characters)",
    )
    audit = Audit()
    call = kept("t")
    call.refusal = "denied by the agent's user: " + huge  # a person's words, quoted
    CallRecords(audit).tool_call(call, AGENT, "refused")  # type: ignore[arg-type]
    reason = audit.records[0][0].reason
    assert reason is not None and len(reason) < 300


async def test_a_request_is_cancelled_only_when_every_part_of_it_was() -> None:
    one = await cancelled()
    assert ended(one) == ("cancelled", None)
    assert ended(BaseExceptionGroup("g", [one, await cancelled()])) == ("cancelled", None)
    nested = BaseExceptionGroup("g", [BaseExceptionGroup("h", [one])])
    assert ended(nested) == ("cancelled", None)
    mixed = BaseExceptionGroup("g", [one, KeyError("x")])
    assert ended(mixed) == ("error", "mcpd failed: BaseExceptionGroup")
    assert ended(KeyError("x")) == ("error", "mcpd failed: KeyError")


def test_a_request_says_what_its_server_answered_or_what_mcpd_refused() -> None:
    seen = Seen()
    assert seen.words() == ("ok", None)
    assert seen.words(rpc.RPCError(-32602, "no such prompt")) == ("error", "no such prompt")
    seen.name = "review"
    assert seen.words(rpc.RPCError(-32602, "no such prompt")) == ("refused", "no such prompt")
    seen.outcome = Outage("s", "failed", "exited")
    assert seen.words(rpc.RPCError(-32602, "ignored")) == ("outage", "exited")


# -- the records --


class Audit:
    def __init__(self) -> None:
        self.records: list[tuple[CallRecord, Raw | None]] = []
        self.unrouted_ones: list[CallRecord] = []  # of those, what went by ``unrouted``

    def record(self, record: CallRecord, arguments: Raw | None) -> None:
        self.records.append((record, arguments))

    def unrouted(self, record: CallRecord, arguments: Raw | None) -> None:
        self.records.append((record, arguments))
        self.unrouted_ones.append(record)


def test_a_routed_call_is_recorded_once_with_both_names() -> None:
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 1000.25)  # type: ignore[arg-type]
    call = kept("mcp__notes__search", Raw(b'{"q":"x"}'))
    call.arrived, call.known = 1000.0, True
    call.out.alias, call.out.original = "notes", "search"
    call.decision, call.decided_by = "ask", "uid 1000 (ann)"
    records.tool_call(call, AGENT, "ok", result_bytes=77)
    records.tool_call(call, AGENT, "error", "again")  # already recorded: not again
    assert len(audit.records) == 1
    record, arguments = audit.records[0]
    assert (record.name, record.original, record.server) == (
        "mcp__notes__search",
        "search",
        "notes",
    )
    assert (record.decision, record.decided_by, record.outcome) == ("ask", "uid 1000 (ann)", "ok")
    assert (record.args_bytes, record.result_bytes, record.duration_ms) == (9, 77, 250.0)
    assert arguments == Raw(b'{"q":"x"}')


def test_an_unrouted_call_is_recorded_under_the_name_the_agent_used() -> None:
    audit = Audit()
    call = kept("mcp__nowhere__x")
    call.refusal = "no tool of that name"
    CallRecords(audit, wall=lambda: 0.0).tool_call(call, AGENT, "refused", "other")  # type: ignore[arg-type]
    record, arguments = audit.records[0]
    assert (record.name, record.original, record.server) == ("mcp__nowhere__x", None, None)
    assert record.reason == "no tool of that name"  # mcpd's own refusal wins
    assert (record.args_bytes, arguments) == (0, None)


def test_other_requests_are_recorded_with_their_target() -> None:
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 12.5)  # type: ignore[arg-type]
    records.request(12.0, AGENT, "resources/read", "mcpd://notes/x", ("notes", "file:///x"),
                    "ok", None, 40)  # fmt: skip
    records.request(12.0, AGENT, "prompts/get", "nope", None, "refused", "no such prompt", 0,
                    Raw(b"{}"))  # fmt: skip
    (read, _), (prompt, arguments) = audit.records
    assert (read.method, read.server, read.original, read.duration_ms) == (
        "resources/read",
        "notes",
        "file:///x",
        500.0,
    )
    assert (prompt.server, prompt.original, prompt.reason, prompt.args_bytes) == (
        None,
        None,
        "no such prompt",
        2,
    )
    assert arguments == Raw(b"{}")


# -- names an agent chose, of any size --

HUGE = 15 * 1024 * 1024


def test_a_name_no_server_could_have_is_kept_cut_with_its_length() -> None:
    """A record keeps at most a short head of a made-up name past any real one (and of
    a reason quoting it), with its length: a flood of huge names costs the records, the
    journal and the file no more than one of real names."""
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 0.0)  # type: ignore[arg-type]
    name = "x" * HUGE
    call = kept(name)
    call.refusal = "unknown tool"
    records.tool_call(call, AGENT, "refused")
    uri = "mcpd://notes/" + "u" * HUGE
    records.request(0.0, AGENT, "resources/read", uri, ("notes", uri[13:]), "outage",
                    "notes is down: " + uri, 0)  # fmt: skip
    records.request(0.0, AGENT, "prompts/get", name, None, "refused", None, 0)
    (tool, _), (read, _), (prompt, _) = audit.records
    assert tool.name == "x" * 256 + f"… (and {HUGE - 256} more characters)"
    assert tool.reason == "unknown tool"
    assert read.name == uri[:256] + f"… (and {len(uri) - 256} more characters)"
    assert read.original == "u" * 256 + f"… (and {HUGE - 256} more characters)"
    assert read.reason is not None and len(read.reason) < 1024
    assert read.reason.endswith(f"… (and {len(uri) + 15 - 256} more characters)")
    assert prompt.name == tool.name


def test_names_mcpd_knows_are_kept_whole_however_long() -> None:
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 0.0)  # type: ignore[arg-type]
    uri = "file:///" + "d/" * 4000  # a long real URI
    local = "mcp__" + "n" * 1019  # the longest local name there is
    routed = kept(local)
    routed.known, routed.out.alias = True, "notes"
    held = kept(local)
    held.known, held.refusal = True, "held: its definition changed"
    records.tool_call(routed, AGENT, "ok")
    records.tool_call(held, AGENT, "refused")
    records.request(0.0, AGENT, "resources/read", uri, ("notes", uri), "ok", None, 0)
    assert [r.name for r, _ in audit.records] == [local, local, uri]
    assert audit.records[2][0].original == uri


def test_a_made_up_name_is_kept_as_a_short_head_and_its_length() -> None:
    """A name that names nothing mcpd knows is kept whole only as long as a real one
    could be shown in a few hundred characters: a flood of made-up names of a few
    thousand characters each fills the file no faster than one of real names."""
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 0.0)  # type: ignore[arg-type]
    made_up = "n0000001" + "A" * 8000
    call = kept(made_up)
    call.refusal = "unknown tool"
    records.tool_call(call, AGENT, "refused")
    records.request(0.0, AGENT, "prompts/get", made_up, None, "refused", "no such prompt", 0)
    records.request(0.0, AGENT, "resources/read", "file:///" + made_up, None, "refused", None, 0)
    names = [r.name or "" for r, _ in audit.records]
    assert names[0] == names[1] == made_up[:256] + "… (and 7752 more characters)"
    assert names[2].startswith("file:///n0000001AAA") and names[2].endswith(
        "(and 7760 more characters)"
    )
    assert all(len(name) < 300 for name in names)


def test_only_requests_refused_before_any_server_or_rule_can_be_counted_together() -> None:
    """What mcpd refused before any server or rule saw it goes to the audit log as
    such (which counts it past its agent's budget); a call that reached a server, or a
    rule's decision, is always a record of its own."""
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 0.0)  # type: ignore[arg-type]
    unknown = kept("mcp__nowhere__x")
    unknown.refusal = "unknown tool"
    records.tool_call(unknown, AGENT, "refused")
    bad = kept("mcp__notes__search")
    records.tool_call(bad, AGENT, "error", "Invalid params: arguments must be an object")
    searched = kept("search_tools")  # search mode's meta-tool, answered by mcpd
    records.tool_call(searched, AGENT, "ok")
    denied = kept("mcp__notes__delete")
    denied.known, denied.out.alias = True, "notes"
    denied.decision, denied.decided_by = "deny", "policy[0]"
    records.tool_call(denied, AGENT, "refused", "denied by policy[0]")
    failed = kept("mcp__notes__read")
    failed.known, failed.out.alias = True, "notes"
    records.tool_call(failed, AGENT, "error", "the server said no")
    records.request(0.0, AGENT, "prompts/get", "nope", None, "refused", "no such prompt", 0)
    records.request(0.0, AGENT, "prompts/get", "p", ("notes", "p"), "error", "bad", 0, sent=True)
    records.request(0.0, AGENT, "prompts/get", "p", ("notes", "p"), "refused", "held", 0)
    agent = StandInAgent(World().profile)
    records.turned_away(agent, rpc.Request(1, "tools/call", Raw(b'{"name": "t"}')), ID_IN_USE)
    assert [(r.name, r.outcome) for r in audit.unrouted_ones] == [
        ("mcp__nowhere__x", "refused"),
        ("mcp__notes__search", "error"),
        ("nope", "refused"),
        ("p", "refused"),  # held: mcpd did not send it on
        ("t", "refused"),
    ]
    assert len(audit.records) == 9


# -- a request refused before it started --


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "t", "arguments": {"a": 1}}, "t"),
        ("prompts/get", {"name": "p", "arguments": {"a": "1"}}, "p"),
        ("resources/read", {"uri": "file:///x"}, "file:///x"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}}, "p"),
        ("prompts/get", {"name": ["not", "a", "name"]}, None),
        ("resources/read", None, None),
    ],
)
def test_a_request_turned_away_at_the_door_is_recorded_with_what_it_named(
    method: str, params: object, name: str | None
) -> None:
    audit = Audit()
    records = CallRecords(audit, wall=lambda: 3.0)  # type: ignore[arg-type]
    agent = StandInAgent(World().profile)
    raw = None if params is None else Raw(json.dumps(params).encode())
    records.turned_away(agent, rpc.Request(1, method, raw), ID_IN_USE)
    records.turned_away(agent, rpc.Request(2, "ping", None), ID_IN_USE)  # no record
    [(record, arguments)] = audit.records
    assert (record.method, record.name, record.outcome, record.reason) == (
        method,
        name,
        "refused",
        ID_IN_USE,
    )
    assert (record.decision, record.decided_by, record.server) == ("none", "", None)
    given = params.get("arguments") if isinstance(params, dict) else None
    assert arguments == (None if given is None else Raw(json.dumps(given).encode()))


# -- through the daemon: a profile switched while a request is under way --

ASKER = str(Path(__file__).parents[3] / "support" / "asking" / "overlapping_asker.py")
ANSWERS = {"elicitation/create": {"action": "accept", "content": {}}, "roots/list": {"roots": []}}


def answer(method: str, params: Any) -> Any:
    return ANSWERS[method]


@pytest.mark.parametrize(
    ("method", "params", "asks"),
    [
        ("tools/call", {"name": "mcp__two__ask_twice", "arguments": {"second": "roots"}}, 2),
        ("prompts/get", {"name": "mcp__two__confirm"}, 1),
    ],
)
async def test_a_request_is_recorded_under_the_profile_it_was_routed_in(
    tmp_path: Path, method: str, params: dict[str, Any], asks: int
) -> None:
    server = {"command": sys.executable, "args": [ASKER], "era": "legacy"}
    config = make_config(
        tmp_path,
        {"two": server},
        profiles={"coding": {"servers": ["two"]}},
        state_dir=str(tmp_path / "state"),
        audit_journal=False,
        ask_timeout=3600.0,
        call_timeout=3600.0,
    )
    with trio.fail_after(60):
        async with (
            running(config) as daemon,
            connect_answering(daemon.socket_path, False, answer) as agent,
        ):
            await agent.initialize_with({"elicitation": {}, "roots": {}})
            await agent.use_profile("coding")
            agent.hold = True  # the request waits for the agent's answers
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.result, method, params)
                asked = await agent.wait_asked(asks)
                await agent.use_profile("default")  # before the request ends
                for request in asked:
                    agent.answer_held(request)
            await daemon.audit.flush()
    records = [r for r in AuditRecords(str(tmp_path / "state")) if r.method == method]
    assert [(r.outcome, r.agent.profile) for r in records] == [("ok", "coding")]
