"""The router on the agent side, called directly: a call made of what either decoder
read (its ``_meta`` envelope's context kept per connection, within a bound, and every
wrong shape of it refused), routed through a profile (meta-tools, unknown and held
tools, the policy), the reply and audit record of each kind of outcome, and a call
given up or failed recorded once."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from mcpd.agents.agent import AgentCall, Sent
from mcpd.agents.calls import results
from mcpd.agents.calls.callpolicy import Ask
from mcpd.agents.lists.metatools import CALL, SEARCH
from mcpd.servers.status.outage import Outage
from protocol.jsonrpc import envelope, splice
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.clients.agent import META
from tests.support.parts.routing import StandInAgent, World

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"


def line(rid: Any, name: str, arguments: Any = None, meta: Any = UNSET) -> bytes:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not UNSET:
        params["_meta"] = meta
    msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return json.dumps(msg).encode()


def spliced(data: bytes) -> splice.SplicedRequest:
    decoded = splice.decode_call(data)
    assert decoded is not None
    return decoded


def general(data: bytes) -> rpc.Request:
    msg = envelope.decode_message(data)
    assert isinstance(msg, rpc.Request)
    return msg


DECODERS = [spliced, general]


def text(outcome: Any) -> str:
    assert isinstance(outcome, mcp.CallToolResult), outcome
    block = outcome.content[0]
    assert isinstance(block, mcp.TextContent)
    return block.text


# -- the call, from either decoder --


@pytest.mark.parametrize("decode", DECODERS)
def test_either_decoder_makes_the_same_call(decode: Any) -> None:
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    meta = {**META, "progressToken": "p1", "note": [1]}
    call = world.router.call_of(agent, decode(line("r", "t", {"a": 1}, meta)))
    out = call.out
    assert (out.id, out.name, json.loads(bytes(out.arguments))) == ("r", "t", {"a": 1})  # type: ignore[arg-type]
    assert out.meta == {"progressToken": "p1", "note": [1]}  # the agent's own keys
    assert call.modern and out.ctx.era == "modern" and out.ctx.meta == meta
    assert call.to is agent and out.owner is agent.owner and call.arrived == 100.0


@pytest.mark.parametrize("decode", DECODERS)
def test_a_call_without_an_envelope_is_refused_until_the_agent_initialized(decode: Any) -> None:
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    with pytest.raises(rpc.RPCError) as refused:
        world.router.call_of(agent, decode(line(1, "t")))
    assert refused.value.code == rpc.INVALID_PARAMS and VERSION in refused.value.message
    agent.session.legacy_version = "2025-11-25"
    call = world.router.call_of(agent, decode(line(1, "t")))
    assert call.out.ctx.era == "legacy" and not call.modern and call.out.meta is None


def test_an_envelope_seen_again_is_read_once_and_one_with_keys_of_the_agents_own_never_kept() -> (
    None
):
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    first = world.router.call_of(agent, spliced(line(1, "t", {}, META))).out
    again = world.router.call_of(agent, spliced(line(2, "t", {}, META))).out
    assert again.ctx is first.ctx and again.meta is None
    for rid in (3, 4):
        own = world.router.call_of(
            agent, spliced(line(rid, "t", {}, {**META, "progressToken": rid}))
        )
        assert own.out.meta == {"progressToken": rid}
    assert len(agent.contexts) == 1


def test_thousands_of_distinct_envelopes_are_each_read_as_they_are_and_few_kept() -> None:
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    for n in range(3000):
        meta = {**META, CAPS: {"n": {"x": n}}}
        call = world.router.call_of(agent, spliced(line(n, "t", {}, meta)))
        assert call.out.ctx.capabilities == {"n": {"x": n}}
    assert 0 < len(agent.contexts) <= 8
    # The first kept are still right.
    call = world.router.call_of(agent, spliced(line("x", "t", {}, {**META, CAPS: {"n": {"x": 0}}})))
    assert call.out.ctx.capabilities == {"n": {"x": 0}}


def test_envelopes_far_larger_than_any_hosts_are_read_and_not_kept() -> None:
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    for n in range(8):
        meta = {**META, CAPS: {"n": {"x": n}, "pad": "p" * (1024 * 1024)}}
        call = world.router.call_of(agent, spliced(line(n, "t", {}, meta)))
        assert call.out.ctx.capabilities["n"] == {"x": n}
    assert sum(map(len, agent.contexts)) <= 64 * 1024


def test_contexts_are_kept_per_connection() -> None:
    world = World()
    legacy, modern = StandInAgent(world.profile), StandInAgent(world.profile, legacy=False)
    meta = {"io.modelcontextprotocol/other": 1}  # reserved keys only, no version
    assert world.router.call_of(legacy, spliced(line(1, "t", {}, meta))).out.ctx.era == "legacy"
    with pytest.raises(rpc.RPCError):
        world.router.call_of(modern, spliced(line(1, "t", {}, meta)))
    assert modern.contexts == {}


@pytest.mark.parametrize("meta", [None, [], [META], 1, "x", True])
def test_an_envelope_that_is_not_an_object_is_refused_in_the_same_words_by_either_decoder(
    meta: Any,
) -> None:
    world = World()
    agent = StandInAgent(world.profile)
    said = []
    for decode in DECODERS:
        with pytest.raises(rpc.InvalidParams) as refused:
            world.router.call_of(agent, decode(line(1, "t", {}, meta)))
        said.append(str(refused.value))
    assert said[0] == said[1] and "_meta" in said[0]
    assert agent.contexts == {}


@pytest.mark.parametrize(
    ("meta", "code"),
    [
        ({VERSION: "1999-01-01", CAPS: {}}, rpc.UNSUPPORTED_PROTOCOL_VERSION),
        ({VERSION: 5, CAPS: {}}, rpc.UNSUPPORTED_PROTOCOL_VERSION),
        ({VERSION: META[VERSION]}, rpc.INVALID_PARAMS),
        ({VERSION: META[VERSION], CAPS: []}, rpc.INVALID_PARAMS),
        ({VERSION: META[VERSION], CAPS: "all"}, rpc.INVALID_PARAMS),
    ],
)
@pytest.mark.parametrize("decode", DECODERS)
def test_a_wrong_envelope_is_refused_and_never_kept(meta: Any, code: int, decode: Any) -> None:
    world = World()
    agent = StandInAgent(world.profile, legacy=False)
    for _ in range(2):
        with pytest.raises(rpc.RPCError) as refused:
            world.router.call_of(agent, decode(line(1, "t", {}, meta)))
        assert refused.value.code == code
    assert agent.contexts == {}


@pytest.mark.parametrize("params", [{"name": 1}, {"arguments": {}}, {"name": None}, []])
def test_params_that_are_no_call_are_invalid(params: Any) -> None:
    world = World()
    agent = StandInAgent(world.profile)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    with pytest.raises(rpc.InvalidParams):
        world.router.call_of(agent, general(json.dumps(msg).encode()))


# -- routing --


def routed(world: World, name: str, arguments: Any = None, **agent: Any) -> tuple[AgentCall, Any]:
    caller = StandInAgent(world.profile, **agent)
    call = world.router.call_of(caller, spliced(line(1, name, arguments, META)))
    return call, world.router.route(call)


def test_a_listed_tool_goes_to_its_server_under_the_servers_name() -> None:
    world = World()
    local = world.local("git", "status")
    call, outcome = routed(world, local, {"a": 1})
    # Let through with the tool it was routed to, which its later rounds are held to.
    assert isinstance(outcome, Sent) and outcome.entry.original == "status"
    assert outcome.profile is world.profile
    # The agent's name for it stays what it called; the server's goes beside it.
    assert call.known and call.out.name == local
    assert (call.out.alias, call.out.original) == ("git", "status")
    assert call.sight is world.profile.view


@pytest.mark.parametrize("arguments", [[], [{}], 1, "x", True, 0.5])
def test_arguments_that_are_not_an_object_never_reach_the_server(arguments: Any) -> None:
    world = World()
    caller = StandInAgent(world.profile)
    for decode in DECODERS:
        call = world.router.call_of(
            caller, decode(line(1, world.local("git", "status"), arguments))
        )
        world.router.start(call)
    assert world.servers.started == []
    for _, outcome in caller.finished:
        assert isinstance(outcome, rpc.RPCError) and outcome.code == rpc.INVALID_PARAMS
        assert outcome.message == "Invalid params: tools/call arguments must be an object"


@pytest.mark.parametrize("arguments", [None, {}, {"a": [1]}])
def test_arguments_left_out_null_or_an_object_go_on(arguments: Any) -> None:
    world = World()
    data = line(1, world.local("git", "status"), META)
    if arguments is not None:
        data = line(1, world.local("git", "status"), arguments, META)
    caller = StandInAgent(world.profile)
    world.router.start(world.router.call_of(caller, spliced(data)))
    assert len(world.servers.started) == 1


def test_an_unknown_tool_is_answered_here_with_the_names_it_is_close_to() -> None:
    world = World()
    local = world.local("notes", "search")
    call, outcome = routed(world, local + "x")
    assert outcome.isError and f"Did you mean: {local} (server 'notes')," in text(outcome)
    assert call.refusal == "unknown tool" and call.out.alias == ""


def test_a_held_tool_is_refused_before_its_server_or_any_rule() -> None:
    world = World({"action": "allow"}, held=("search",))
    local = world.local("notes", "search")
    caller = StandInAgent(world.profile)
    call = world.router.call_of(caller, spliced(line(1, local, {})))
    world.router.start(call)
    assert world.servers.started == []
    [(_, outcome)] = caller.finished
    assert outcome.isError and "held by mcpd" in text(outcome)
    assert outcome.meta["mcpd/held"]["item"] == "search"
    assert call.refusal is not None and call.refusal.startswith("held: its definition changed")
    # Its neighbour on the same server is not held.
    world.router.start(world.router.call_of(caller, spliced(line(2, world.local("notes", "add")))))
    assert len(world.servers.started) == 1


def test_a_call_the_policy_denies_is_answered_here_and_one_it_asks_about_waits_in_a_task() -> None:
    world = World(
        {"action": "deny", "servers": ["git"], "reason": "no git"},
        {"action": "ask", "servers": ["notes"]},
    )
    caller = StandInAgent(world.profile)
    denied = world.router.call_of(caller, spliced(line(1, world.local("git", "status"))))
    asked = world.router.call_of(caller, spliced(line(2, world.local("notes", "add"))))
    again = world.router.call_of(caller, spliced(line(3, world.local("notes", "add"))))
    assert isinstance(world.router.route(again), Ask)
    world.router.start(denied)
    world.router.start(asked)
    assert world.servers.started == []
    [(call, outcome)] = caller.finished
    assert call is denied and outcome.isError and "no git" in text(outcome)
    assert [c for c, _ in caller.in_tasks] == [asked]


def test_in_search_mode_the_meta_tools_answer_or_stand_for_the_call_they_wrap() -> None:
    world = World(discovery="search")
    local = world.local("git", "status")
    call, outcome = routed(world, SEARCH, {"query": "status"})
    assert isinstance(outcome, mcp.CallToolResult) and local in json.dumps(
        rpc.encode(outcome).decode()
    )
    call, outcome = routed(world, CALL, {"name": local, "arguments": {"a": 1}})
    assert isinstance(outcome, Sent)
    out = call.out
    # A meta-call's name is the call it stands for, as the agent's profile names it.
    assert call.known
    assert (out.name, out.alias, out.original, bytes(out.arguments)) == (  # type: ignore[arg-type]
        local,
        "git",
        "status",
        b'{"a":1}',
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": CALL, "arguments": {"name": "x"}},  # a meta-call of a meta-call
        {"name": "mcp__git__status", "arguments": [1]},
        {"name": 5},
        {},
        None,
    ],
)
def test_a_meta_call_that_stands_for_no_call_is_refused_without_a_server(arguments: Any) -> None:
    world = World(discovery="search")
    caller = StandInAgent(world.profile)
    world.router.start(world.router.call_of(caller, spliced(line(1, CALL, arguments))))
    assert world.servers.started == []
    [(_, outcome)] = caller.finished
    assert isinstance(outcome, rpc.RPCError | mcp.CallToolResult)
    if isinstance(outcome, mcp.CallToolResult):
        assert outcome.isError


def test_where_everything_is_listed_a_meta_tools_name_is_unknown() -> None:
    world = World()
    _, outcome = routed(world, SEARCH, {"query": "x"})
    assert outcome.isError and "Unknown tool" in text(outcome)


# -- the reply, and the record --


def started(
    world: World, name: str, legacy: bool = True, rid: Any = 7
) -> tuple[StandInAgent, AgentCall]:
    caller = StandInAgent(world.profile, legacy=legacy)
    meta = UNSET if legacy else META
    call = world.router.call_of(caller, spliced(line(rid, name, {}, meta)))
    world.router.start(call)
    assert world.servers.started[-1] is call.out
    return caller, call


def test_a_short_result_is_shaped_by_the_head_its_scheduler_read_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = World()
    _, call = started(world, world.local("git", "status"))
    result = Raw(b'{"content":[{"type":"text","text":"hi"}],"isError":true}')
    call.out.head = msgspec.json.decode(result, type=mcp.CallToolResultKinds)

    class Unread:
        def decode(self, raw: object) -> None:
            raise AssertionError("the head was read again")

    monkeypatch.setattr(results, "_KINDS", Unread())
    data, was_spliced = world.router.reply(call, result)
    assert was_spliced and json.loads(data)["result"] == json.loads(bytes(result))
    [record] = world.audit.records
    assert record.outcome == "tool_error"


@pytest.mark.parametrize("splicing", [True, False])
def test_a_servers_result_is_passed_on_spliced_only_where_splicing_is_on(splicing: bool) -> None:
    world = World(splice=splicing)
    _, call = started(world, world.local("git", "status"), rid="a\nb")
    result = Raw(b'{"content":[{"type":"text","text":"hi"}],"x":{"y":[1]}}')
    data, was_spliced = world.router.reply(call, result)
    assert was_spliced is splicing
    assert json.loads(data) == {"jsonrpc": "2.0", "id": "a\nb", "result": json.loads(bytes(result))}
    [record] = world.audit.records
    assert (record.outcome, record.server, record.original, record.result_bytes) == (
        "ok",
        "git",
        "status",
        len(data),
    )


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        (Raw(b'{"content":[],"isError":true}'), ("tool_error", None)),
        (rpc.RPCError(-32002, "gone", {"d": 1}), ("error", "gone")),
        (
            Outage(server="git", state="timeout", reason="took too long"),
            ("timeout", "took too long"),
        ),
        (Outage(server="git", state="failed", reason="exited 1"), ("outage", "exited 1")),
        (mcp.text_result("fine"), ("ok", None)),
    ],
)
@pytest.mark.parametrize("legacy", [True, False])
def test_each_outcome_has_its_reply_and_its_record(outcome: Any, words: Any, legacy: bool) -> None:
    world = World()
    _, call = started(world, world.local("git", "status"), legacy=legacy)
    data, was_spliced = world.router.reply(call, outcome, rid=5)
    reply = json.loads(data)
    assert reply["id"] == 5
    if isinstance(outcome, rpc.RPCError):
        assert reply["error"] == {"code": -32002, "message": "gone", "data": {"d": 1}}
        assert not was_spliced
    else:
        assert reply["result"].get("isError", False) is (words[0] != "ok")
        assert ("resultType" in reply["result"]) is (not legacy)
        if isinstance(outcome, Outage):
            assert outcome.reason in json.dumps(reply)
    [record] = world.audit.records
    assert (record.outcome, record.reason) == words


def test_a_call_its_servers_would_not_let_wait_is_recorded_in_their_words() -> None:
    """What the servers say of a call they refused to queue (its bytes past a bound)
    is its record's reason, not the first words of the result its agent gets."""
    world = World()
    caller, call = started(world, world.local("git", "status"))
    why = "not queued: its agent's calls and requests waiting would keep over 32.0 MiB"
    call.out.unqueued = why
    world.servers.answer(mcp.text_result("mcpd did not send this call", is_error=True))
    [(finished, outcome)] = caller.finished
    assert finished is call and call.out.caller is not call  # the servers are done with it
    world.router.reply(call, outcome)
    [record] = world.audit.records
    assert (record.outcome, record.reason) == ("refused", why)


def test_a_call_given_up_is_told_to_its_server_and_recorded_once() -> None:
    world = World()
    _, call = started(world, world.local("git", "status"))
    world.router.abandon(call)
    world.router.abandon(call)
    world.router.records.failed(call, ValueError("late"))
    assert world.servers.cancelled == [call.out, call.out]
    assert world.audit.outcomes() == [(world.local("git", "status"), "cancelled")]


def test_a_call_that_failed_on_its_way_says_so_once_naming_only_the_kind() -> None:
    world = World()
    _, call = started(world, world.local("git", "status"))
    world.router.records.failed(call, KeyError("secret words"))
    world.router.reply(call, Raw(b'{"content":[]}'))
    [record] = world.audit.records
    assert (record.outcome, record.reason) == ("error", "mcpd failed: KeyError")


def test_a_call_that_could_not_be_read_is_recorded_with_its_reason_cut() -> None:
    world = World()
    world.router.unreadable(StandInAgent(world.profile), "Invalid params: " + "x" * 1000)
    [record] = world.audit.records
    assert (record.method, record.name, record.outcome) == ("tools/call", None, "error")
    reason = "Invalid params: " + "x" * 184
    assert record.reason == reason + f"\u2026 (and {1016 - 200} more characters)"


def test_a_call_mcpd_answered_before_any_rule_records_no_decision() -> None:
    """An unknown or held name, arguments that are not an object, a search the
    meta-tools answer, a call that could not be read: no rule was asked, and the record
    says so rather than that a rule or the default allowed them."""
    world = World({"action": "allow", "servers": ["git"]}, held=("search",))
    caller = StandInAgent(world.profile)
    status = world.local("git", "status")
    calls = [
        ("mcp__nowhere__x", {}),
        (world.local("notes", "search"), {}),
        (status, [1]),
        (status, {}),
        (world.local("notes", "add"), {}),
    ]
    for rid, (name, arguments) in enumerate(calls):
        call = world.router.call_of(caller, spliced(line(rid, name, arguments)))
        outcome = world.router.route(call)
        answered = Raw(b'{"content":[]}') if isinstance(outcome, Sent) else outcome
        world.router.reply(call, answered)
    world.router.unreadable(caller, "Invalid params: no name")
    decided = [(r.outcome, r.decision, r.decided_by) for r in world.audit.records]
    assert decided == [
        ("refused", "none", ""),
        ("refused", "none", ""),
        ("error", "none", ""),
        ("ok", "allow", "policy[0]"),
        ("ok", "allow", "default"),
        ("error", "none", ""),
    ]
    search = World(discovery="search")
    call, outcome = routed(search, SEARCH, {"query": "status"})
    search.router.reply(call, outcome)
    assert [(r.outcome, r.decision) for r in search.audit.records] == [("ok", "none")]
