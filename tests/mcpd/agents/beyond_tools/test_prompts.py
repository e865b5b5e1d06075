"""prompts/list, prompts/get and completion/complete as the agent side answers them,
called directly over a catalog: what an agent may name, what it is refused, and how a
server's answer (a hostile one included) is shaped into the reply."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
from msgspec import Raw

from mcpd.agents.askback.driver import AgentSide, AskBackDriver
from mcpd.agents.beyond_tools.completions import complete
from mcpd.agents.beyond_tools.prompt_bounds import capped_completion
from mcpd.agents.beyond_tools.prompts import (
    OUTAGE,
    get_prompt,
    held_error,
    list_prompts,
    outage_error,
    reply_encoded,
    reply_for,
)
from mcpd.agents.calls.callrecords import Seen
from mcpd.agents.lists.paging import encode_cursor, list_digest
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.status.outage import Outage
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

MODERN = RequestContext("modern", mcp.LATEST_MODERN, {}, {})


def catalog_servers(*prompt_names: str) -> AllServers:
    """The prompts of a server "notes" in the catalog; no server runs, so every request
    that reaches one ends in the outage of a server removed from the configuration."""
    catalog = Catalog(NamingConfig())
    catalog.prompts.update("notes", [features.Prompt(name=n) for n in prompt_names])
    config = parse_config({"servers": {"notes": {"command": "x"}}}, env={})
    return AllServers(Supervisor(config, catalog), catalog)


def agent(modern: bool = True, capabilities: dict[str, Any] | None = None) -> AgentSide:
    sent: list[bytes] = []
    return AgentSide(object(), modern, capabilities, None, sent.append)


def request(method: str, params: dict[str, Any], rid: int = 1) -> rpc.Request:
    return rpc.Request(rid, method, Raw(msgspec.json.encode(params)))


def error_of(reply: bytes) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.decode(reply)["error"]
    return out


def raw(value: Any) -> Raw:
    return Raw(msgspec.json.encode(value))


def keep(result: Raw) -> Raw:
    return result


# -- prompts/list --


def test_prompts_are_listed_in_pages_and_a_cursor_past_the_list_is_refused() -> None:
    servers = catalog_servers("a", "b", "c")
    first = list_prompts(servers, mcp.ListParams(), None, 2)
    assert [msgspec.json.decode(p)["name"] for p in first.prompts] == [
        "mcp__notes__a",
        "mcp__notes__b",
    ]
    assert isinstance(first.nextCursor, str)
    rest = list_prompts(servers, mcp.ListParams(cursor=first.nextCursor), None, 2)
    assert [msgspec.json.decode(p)["name"] for p in rest.prompts] == ["mcp__notes__c"]
    assert rest.nextCursor is msgspec.UNSET
    with pytest.raises(rpc.RPCError) as refused:
        past = encode_cursor(4, list_digest([bytes(p) for p in servers.prompt_listing()]))
        list_prompts(servers, mcp.ListParams(cursor=past), None, 2)
    assert refused.value.code == rpc.INVALID_PARAMS


def test_a_modern_agent_is_told_its_prompt_list_is_private_and_not_to_be_kept() -> None:
    servers = catalog_servers("a")
    modern = msgspec.json.decode(
        msgspec.json.encode(list_prompts(servers, mcp.ListParams(), MODERN, 0))
    )
    assert (modern["ttlMs"], modern["cacheScope"]) == (0, "private")
    legacy = msgspec.json.decode(
        msgspec.json.encode(list_prompts(servers, mcp.ListParams(), None, 0))
    )
    assert "ttlMs" not in legacy and "cacheScope" not in legacy


def test_a_profile_lists_only_the_prompts_it_sees() -> None:
    servers = catalog_servers("open", "secret")
    page = list_prompts(servers, mcp.ListParams(), None, 0, lambda alias, n: n != "secret")
    assert [msgspec.json.decode(p)["name"] for p in page.prompts] == ["mcp__notes__open"]


# -- prompts/get --


async def get(
    servers: AllServers, params: dict[str, Any], seen: Seen | None = None, **kw: Any
) -> bytes:
    return await get_prompt(
        servers, AskBackDriver(), agent(), request("prompts/get", params), 1000, seen=seen, **kw
    )


async def test_an_unknown_prompt_is_refused_with_its_name_cut_short() -> None:
    servers = catalog_servers("daily")
    with pytest.raises(rpc.RPCError) as refused:
        await get(servers, {"name": "x" * 100_000})
    assert refused.value.code == rpc.INVALID_PARAMS
    assert refused.value.message.startswith("Unknown prompt 'xxx")
    assert len(refused.value.message) < 300


async def test_a_prompt_the_profile_does_not_see_is_as_unknown_as_one_never_listed() -> None:
    servers = catalog_servers("daily")
    seen = Seen()
    with pytest.raises(rpc.RPCError, match="Unknown prompt 'mcp__notes__daily'"):
        await get(servers, {"name": "mcp__notes__daily"}, seen, sees=lambda alias, name: False)
    assert seen.name == "mcp__notes__daily" and seen.target is None


async def test_a_held_prompt_is_refused_before_its_server_is_asked() -> None:
    servers = catalog_servers("daily")
    entry = servers.lookup_prompt("mcp__notes__daily")
    assert entry is not None
    entry.held = "its description changed"
    seen = Seen()
    with pytest.raises(rpc.RPCError) as refused:
        await get(servers, {"name": "mcp__notes__daily"}, seen)
    assert refused.value.code == OUTAGE
    assert "held by mcpd: its description changed" in refused.value.message
    assert refused.value.data == {
        "mcpd/held": {"server": "notes", "item": "daily", "reason": "its description changed"}
    }
    assert seen.target == ("notes", "daily") and seen.outcome is None


async def test_a_prompt_whose_server_is_gone_is_answered_with_the_outage() -> None:
    servers = catalog_servers("daily")
    seen = Seen()
    with trio.fail_after(5):
        reply = await get(servers, {"name": "mcp__notes__daily", "arguments": {"day": "mon"}}, seen)
    error = error_of(reply)
    assert error["code"] == OUTAGE
    assert error["data"]["mcpd/outage"]["server"] == "notes"
    assert isinstance(seen.outcome, Outage)
    assert seen.arguments is not None and msgspec.json.decode(seen.arguments) == {"day": "mon"}


@pytest.mark.parametrize("params", [{}, {"name": 3}, {"name": None}])
async def test_prompts_get_without_a_name_is_invalid_params(params: dict[str, Any]) -> None:
    with pytest.raises(rpc.InvalidParams):
        await get(catalog_servers("daily"), params)


# -- what a server answered, shaped --


def test_a_complete_result_is_passed_to_a_legacy_agent_as_the_server_sent_it() -> None:
    result = raw({"messages": [], "description": "d"})
    assert reply_for(None, "notes", agent(modern=False), result, keep) is result  # type: ignore[arg-type]


def test_a_modern_agent_is_told_the_result_is_complete_and_a_read_how_to_cache_it() -> None:
    result = raw({"messages": []})
    shaped = reply_for(None, "notes", agent(), result, keep)  # type: ignore[arg-type]
    assert shaped == {"messages": [], "resultType": "complete"}
    cached = reply_for(None, "notes", agent(), raw({"contents": []}), keep, cacheable=True)  # type: ignore[arg-type]
    assert cached == {"contents": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


def test_an_outage_and_a_servers_error_are_raised_as_errors() -> None:
    outage = Outage("notes", "stopped", "removed from the configuration")
    with pytest.raises(rpc.RPCError) as raised:
        reply_for(None, "notes", agent(), outage, keep)  # type: ignore[arg-type]
    assert raised.value.code == OUTAGE and raised.value.data == {"mcpd/outage": outage.meta()}
    assert raised.value.message == outage.sentence()
    theirs = rpc.RPCError(-32001, "no such day")
    with pytest.raises(rpc.RPCError) as raised:
        reply_for(None, "notes", agent(), theirs, keep)  # type: ignore[arg-type]
    assert raised.value is theirs


def test_input_required_goes_to_an_agent_that_can_answer_it_and_is_an_error_for_others() -> None:
    asks = {"inputRequests": {"q": {"method": "elicitation/create", "params": {}}}}
    result = raw({"resultType": "input_required", "requestState": "s", **asks})
    can = agent(capabilities={"elicitation": {}})
    assert reply_for(None, "notes", can, result, keep) is result  # type: ignore[arg-type]
    for cannot in (agent(), agent(modern=False, capabilities={"elicitation": {}})):
        with pytest.raises(rpc.RPCError) as raised:
            reply_for(None, "notes", cannot, result, keep)  # type: ignore[arg-type]
        assert raised.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert raised.value.data == {"mcpd/inputRequired": {"q": {"method": "elicitation/create"}}}


def test_a_url_elicitation_is_refused_to_an_agent_that_declared_form_mode_only() -> None:
    ask = {"method": "elicitation/create", "params": {"mode": "url", "url": "https://x.example"}}
    result = raw({"resultType": "input_required", "inputRequests": {"q": ask}})
    for declared in ({}, {"form": {}}):
        form_only = agent(capabilities={"elicitation": declared})
        with pytest.raises(rpc.RPCError) as raised:
            reply_for(None, "notes", form_only, result, keep)  # type: ignore[arg-type]
        assert raised.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    url_mode = agent(capabilities={"elicitation": {"url": {}}})
    assert reply_for(None, "notes", url_mode, result, keep) is result  # type: ignore[arg-type]


def test_a_legacy_servers_ask_to_open_a_link_reaches_each_agent_as_it_can_take_it() -> None:
    """A -32042: as it is to a legacy agent that declared URL elicitation, as an
    input_required to a modern one that did, as mcpd's -32021 without the link to
    others."""
    link = {"mode": "url", "url": "https://x.example/login", "message": "Log in"}
    theirs = rpc.RPCError(-32042, "[notes] URL needed", {"elicitations": [link]})
    url = {"elicitation": {"url": {}}}
    with pytest.raises(rpc.RPCError) as raised:
        reply_for(None, "notes", agent(False, url), theirs, keep)  # type: ignore[arg-type]
    assert raised.value is theirs
    asked = reply_for(None, "notes", agent(True, url), theirs, keep)  # type: ignore[arg-type]
    [request] = msgspec.json.decode(asked)["inputRequests"].values()
    assert request["params"]["url"] == link["url"]
    for cannot in (agent(), agent(False, {"elicitation": {}})):
        with pytest.raises(rpc.RPCError) as raised:
            reply_for(None, "notes", cannot, theirs, keep)  # type: ignore[arg-type]
        assert raised.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert "needs the user to open a link" in raised.value.message
        assert "x.example" not in raised.value.message


def test_an_unknown_result_type_is_an_internal_error_naming_the_server() -> None:
    with pytest.raises(rpc.RPCError) as raised:
        reply_for(None, "notes", agent(), raw({"resultType": "later"}), keep)  # type: ignore[arg-type]
    assert raised.value.code == rpc.INTERNAL_ERROR
    assert "'notes'" in raised.value.message and '"later"' in raised.value.message


@pytest.mark.parametrize("result", [[1, 2], "text", 3, None, {"resultType": 3}])
def test_a_malformed_result_is_answered_as_malformed_not_raised(result: Any) -> None:
    for side in (agent(), agent(modern=False)):

        def make(side: AgentSide = side) -> Any:
            return reply_for(None, "notes", side, raw(result), keep)  # type: ignore[arg-type]

        told: list[rpc.RPCError] = []
        reply = msgspec.json.decode(reply_encoded(7, make, told.append))
        assert reply["id"] == 7 and reply["error"]["code"] == rpc.INTERNAL_ERROR
        assert reply["error"]["message"].startswith("malformed result from the server")
        assert [e.message for e in told] == [reply["error"]["message"]]


def test_encoded_turns_an_error_raised_into_that_errors_reply() -> None:
    def refuse() -> Any:
        raise held_error("prompt", "mcp__notes__daily", "notes", "daily", "new text")

    told: list[rpc.RPCError] = []
    reply = msgspec.json.decode(reply_encoded("r1", refuse, told.append))
    assert reply["id"] == "r1" and reply["error"]["code"] == OUTAGE
    assert reply["error"]["data"]["mcpd/held"]["item"] == "daily"
    assert [e.code for e in told] == [OUTAGE]
    assert msgspec.json.decode(reply_encoded(2, lambda: {"ok": True}, told.append)) == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"ok": True},
    }


def test_an_outage_error_carries_the_outage_for_a_program_to_read() -> None:
    outage = Outage("notes", "backoff", "exited with status 1", stderr="Error: missing KEY")
    error = outage_error(outage, own_user=True)
    assert error.code == OUTAGE and error.data == {"mcpd/outage": outage.meta()}
    assert error.data["mcpd/outage"]["stderr"] == "Error: missing KEY"
    assert "Error: missing KEY" in error.message
    # An agent of another user is told the outage without the server's stderr line.
    theirs = outage_error(outage, own_user=False)
    assert theirs.code == OUTAGE and "stderr" not in theirs.data["mcpd/outage"]
    assert "missing KEY" not in theirs.message and "exited with status 1" in theirs.message


# -- completion/complete --


async def completing(
    servers: AllServers, ref: dict[str, Any], seen: Seen | None = None, **kw: Any
) -> Any:
    params = {"ref": ref, "argument": {"name": "day", "value": "m"}}
    with trio.fail_after(5):
        return await complete(
            servers, request("completion/complete", params), MODERN, seen=seen, budget=1000, **kw
        )


@pytest.mark.parametrize(
    "ref",
    [
        {"type": "ref/tool", "name": "x"},
        {"type": "ref/prompt"},
        {"type": "ref/resource"},
    ],
)
async def test_a_completion_reference_mcpd_cannot_route_is_refused(ref: dict[str, Any]) -> None:
    with pytest.raises(rpc.RPCError) as refused:
        await completing(catalog_servers("daily"), ref)
    assert refused.value.code == rpc.INVALID_PARAMS
    assert "Unsupported completion reference" in refused.value.message


async def test_completing_an_unknown_or_unseen_prompt_is_refused_as_unknown() -> None:
    servers = catalog_servers("daily")
    with pytest.raises(rpc.RPCError, match="Unknown prompt 'mcp__notes__weekly'"):
        await completing(servers, {"type": "ref/prompt", "name": "mcp__notes__weekly"})
    with pytest.raises(rpc.RPCError, match="Unknown prompt 'mcp__notes__daily'"):
        await completing(
            servers,
            {"type": "ref/prompt", "name": "mcp__notes__daily"},
            sees_prompt=lambda a, n: False,
        )


async def test_completing_a_held_prompt_is_refused_as_held() -> None:
    servers = catalog_servers("daily")
    entry = servers.lookup_prompt("mcp__notes__daily")
    assert entry is not None
    entry.held = "its arguments changed"
    with pytest.raises(rpc.RPCError) as refused:
        await completing(servers, {"type": "ref/prompt", "name": "mcp__notes__daily"})
    assert refused.value.code == OUTAGE and "its arguments changed" in refused.value.message


async def test_completing_a_prompt_of_a_server_that_is_gone_raises_its_outage() -> None:
    seen = Seen()
    with pytest.raises(rpc.RPCError) as refused:
        await completing(
            catalog_servers("daily"), {"type": "ref/prompt", "name": "mcp__notes__daily"}, seen
        )
    assert refused.value.code == OUTAGE
    assert seen.target == ("notes", "daily") and isinstance(seen.outcome, Outage)
    assert seen.arguments is not None
    assert msgspec.json.decode(seen.arguments) == {"name": "day", "value": "m"}


async def test_completing_a_uri_rather_than_a_template_is_refused_as_unknown() -> None:
    catalog = Catalog(NamingConfig())
    catalog.resources.update("a", [features.Resource(uri="a://x", name="x")], [])
    catalog.resources.update("b", [features.Resource(uri="b://y", name="y")], [])
    config = parse_config({"servers": {"a": {"command": "x"}, "b": {"command": "x"}}}, env={})
    servers = AllServers(Supervisor(config, catalog), catalog)
    with pytest.raises(rpc.RPCError) as refused:
        await completing(servers, {"type": "ref/resource", "uri": "c://" + "z" * 10_000})
    assert refused.value.code == rpc.INVALID_PARAMS
    assert refused.value.message.startswith("Unknown resource template 'c://zz")
    assert len(refused.value.message) < 300


async def test_completing_a_held_template_named_by_its_template_is_refused_as_held() -> None:
    catalog = Catalog(NamingConfig())
    note = features.ResourceTemplate(uriTemplate="notes://{id}", name="note")
    catalog.resources.update("notes", [], [note])
    catalog.gate.settle("notes")
    catalog.resources.update("notes", [], [msgspec.structs.replace(note, description="new")])
    config = parse_config({"servers": {"notes": {"command": "x"}}}, env={})
    servers = AllServers(Supervisor(config, catalog), catalog)
    seen = Seen()
    with pytest.raises(rpc.RPCError) as refused:
        await completing(servers, {"type": "ref/resource", "uri": "notes://{id}"}, seen)
    assert refused.value.code == OUTAGE
    assert "held by mcpd: its definition changed" in refused.value.message
    assert seen.target == ("notes", "notes://{id}") and seen.outcome is None  # never asked


async def test_a_held_template_spelled_as_its_server_wrote_it_is_refused_as_held() -> None:
    catalog = Catalog(NamingConfig())
    note = features.ResourceTemplate(uriTemplate="notes://{id}", name="note")
    catch_all = features.ResourceTemplate(uriTemplate="{+path}", name="anything")
    catalog.resources.update("notes", [], [note])
    catalog.resources.update("other", [], [catch_all])
    catalog.gate.settle("notes")
    catalog.gate.settle("other")
    catalog.resources.update("notes", [], [msgspec.structs.replace(note, description="new")])
    config = parse_config(
        {"servers": {"notes": {"command": "x"}, "other": {"command": "x"}}}, env={}
    )
    servers = AllServers(Supervisor(config, catalog), catalog)
    for named in ("notes://{id}", "mcpd://notes/notes://{id}"):
        seen = Seen()
        with pytest.raises(rpc.RPCError) as refused:
            await completing(servers, {"type": "ref/resource", "uri": named}, seen)
        assert refused.value.code == OUTAGE, named
        assert seen.target == ("notes", "notes://{id}") and seen.outcome is None
    with pytest.raises(rpc.RPCError, match="Unknown resource template"):
        await completing(servers, {"type": "ref/resource", "uri": "mcpd://notes/notes://{n}"})


def test_a_completion_past_a_hundred_values_is_cut_and_says_it_has_more() -> None:
    many = raw({"completion": {"values": [str(i) for i in range(150)], "total": 7}})
    cut = capped_completion(many)
    assert cut is not None
    assert cut["completion"] == {
        "values": [str(i) for i in range(100)],
        "hasMore": True,
        "total": 150,
    }
    assert capped_completion(raw({"completion": {"values": ["a"]}})) is None
    assert capped_completion(raw(["not", "a", "completion"])) is None


@pytest.mark.parametrize(
    ("arguments", "named"),
    [([1], "not an array"), ({"day": 3}, "'day' is a number"), ({"d": {"x": "y"}}, "'d'")],
)
async def test_prompt_arguments_that_are_not_strings_are_refused_naming_them(
    arguments: Any, named: str
) -> None:
    seen = Seen()
    with pytest.raises(rpc.RPCError) as refused:
        await get(
            catalog_servers("daily"), {"name": "mcp__notes__daily", "arguments": arguments}, seen
        )
    assert refused.value.code == rpc.INVALID_PARAMS and named in refused.value.message
    assert seen.outcome is None
