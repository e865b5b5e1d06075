"""``DemoServer.handle`` in process, with no transport: the tool table and its cursors,
a call's outcomes (its arguments, a handler's error or bug, progress), the methods of
each era, and the announcements of a changing list."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.demo.runtime import DemoServer, ToolContext, ToolDef, ToolError, object_schema
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession
from tests.support.clients.demo import LEGACY, meta

LIMIT = 10


def req(rid: rpc.Id, method: str, params: dict[str, Any] | None = None) -> rpc.Request:
    return rpc.Request(rid, method, Raw(json.dumps(params).encode()) if params else None)


def modern(rid: rpc.Id, method: str, **params: Any) -> rpc.Request:
    return req(rid, method, {"_meta": meta(), **params})


def calling(name: str, arguments: Any = None, rid: rpc.Id = 1, **m: Any) -> rpc.Request:
    params: dict[str, Any] = {"name": name, "_meta": meta(**m)}
    if arguments is not None:
        params["arguments"] = arguments
    return req(rid, "tools/call", params)


class Notes:
    """What a request sent before its response."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, message: bytes) -> None:
        self.sent.append(json.loads(message))


async def answer(
    server: DemoServer,
    request: rpc.Request,
    session: AgentSession | None = None,
    notes: Notes | None = None,
) -> tuple[dict[str, Any], int | None]:
    reply = await server.handle(session or server.new_session(), request, notes or Notes())
    return json.loads(reply.message), reply.error_code


async def result(server: DemoServer, request: rpc.Request) -> dict[str, Any]:
    msg, code = await answer(server, request)
    assert code is None, msg
    return dict(msg["result"])


def texts(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def _quiet(args: dict[str, Any], ctx: ToolContext) -> str:
    return "quiet"


def named(*names: str, page_size: int | None = None) -> DemoServer:
    return DemoServer(
        "t",
        tools=[ToolDef(n, f"{n}.", object_schema({}), _quiet) for n in names],
        page_size=page_size,
    )


async def pages(server: DemoServer) -> list[list[str]]:
    out: list[list[str]] = []
    cursor: str | None = None
    while True:
        extra = {} if cursor is None else {"cursor": cursor}
        listed = await result(server, modern(len(out), "tools/list", **extra))
        out.append([t["name"] for t in listed["tools"]])
        cursor = listed.get("nextCursor")
        if cursor is None:
            return out


# The tool table and its cursors


async def test_the_list_comes_in_pages_of_the_size_asked() -> None:
    assert await pages(named("a", "b", "c", "d", "e", page_size=2)) == [
        ["a", "b"],
        ["c", "d"],
        ["e"],
    ]
    assert await pages(named("a", "b", page_size=2)) == [["a", "b"]]
    assert await pages(named("a", "b")) == [["a", "b"]]
    assert await pages(named()) == [[]]


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        _cursor("x:y"),
        _cursor("0"),
        _cursor("0:1:2"),
        _cursor("0:0"),
        _cursor("0:9"),
        _cursor("0:-1"),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
async def test_a_cursor_it_did_not_make_is_refused_by_name(cursor: str) -> None:
    msg, code = await answer(named("a", "b", page_size=1), modern(1, "tools/list", cursor=cursor))
    assert code == rpc.INVALID_PARAMS
    assert msg["error"]["message"] == f"Invalid cursor: {cursor!r}"


async def test_a_cursor_from_before_a_change_is_refused_as_expired() -> None:
    server = named("a", "b", page_size=1)
    cursor = (await result(server, modern(1, "tools/list")))["nextCursor"]
    server.add_tool(ToolDef("c", "c.", object_schema({}), _quiet))
    msg, code = await answer(server, modern(2, "tools/list", cursor=cursor))
    assert code == rpc.INVALID_PARAMS
    assert msg["error"]["message"] == "Cursor expired: the tool list changed; list from the start"


async def test_a_tool_added_under_a_name_in_use_replaces_it() -> None:
    server = named("a", "b")
    server.add_tool(ToolDef("a", "New a.", object_schema({}), _quiet, title="A"))
    listed = (await result(server, modern(1, "tools/list")))["tools"]
    assert [(t["name"], t["description"], t.get("title")) for t in listed] == [
        ("a", "New a.", "A"),
        ("b", "b.", None),
    ]


async def test_the_decorator_names_a_tool_after_its_function_or_as_told() -> None:
    server = DemoServer("t")

    @server.tool("Plain.")
    async def plain(args: dict[str, Any], ctx: ToolContext) -> str:
        return "p"

    @server.tool("Renamed.", name="other", annotations={"readOnlyHint": True})
    async def renamed(args: dict[str, Any], ctx: ToolContext) -> str:
        return "r"

    listed = (await result(server, modern(1, "tools/list")))["tools"]
    assert [t["name"] for t in listed] == ["plain", "other"]
    assert listed[0]["inputSchema"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert listed[1]["annotations"] == {"readOnlyHint": True}
    assert "annotations" not in listed[0]


# A call's outcomes


def _server_with(handler: Any, schema: dict[str, Any] | None = None) -> DemoServer:
    return DemoServer("t", tools=[ToolDef("t", "T.", schema or object_schema({}), handler)])


async def test_an_unknown_tool_is_a_protocol_error() -> None:
    msg, code = await answer(named("a"), calling("nope", {}))
    assert (code, msg["error"]["message"]) == (rpc.INVALID_PARAMS, "Unknown tool: nope")


@pytest.mark.parametrize("arguments", [None, {}])
async def test_absent_or_empty_arguments_are_an_empty_object(arguments: Any) -> None:
    seen: list[Any] = []

    async def record(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(args)
        return "ok"

    assert texts(await result(_server_with(record), calling("t", arguments))) == "ok"
    assert seen == [{}]


async def test_null_arguments_are_an_empty_object() -> None:
    seen: list[Any] = []

    async def record(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(args)
        return "ok"

    request = req(1, "tools/call", {"name": "t", "arguments": None, "_meta": meta()})
    msg, code = await answer(_server_with(record), request)
    assert code is None, msg
    assert seen == [{}]


async def test_bad_arguments_are_a_tool_error_the_handler_never_sees() -> None:
    async def never(args: dict[str, Any], ctx: ToolContext) -> str:
        raise AssertionError("called")

    schema = object_schema({"n": {"type": "integer"}}, ["n"])
    got = await result(_server_with(never, schema), calling("t", {"n": "1"}))
    assert got["isError"] is True
    assert texts(got) == "Invalid arguments for t: argument 'n' must be of type integer, got str"


async def test_a_tool_error_is_the_calls_text_exactly() -> None:
    async def refuse(args: dict[str, Any], ctx: ToolContext) -> str:
        raise ToolError("no such ticket: T-9")

    got = await result(_server_with(refuse), calling("t", {}))
    assert (got["isError"], texts(got)) == (True, "no such ticket: T-9")


async def test_a_handlers_bug_is_a_tool_error_naming_it_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def buggy(args: dict[str, Any], ctx: ToolContext) -> str:
        raise KeyError("missing")

    with caplog.at_level(logging.ERROR, "mcpd.demo"):
        got = await result(_server_with(buggy), calling("t", {}))
    assert (got["isError"], texts(got)) == (True, "t failed: KeyError: 'missing'")
    assert caplog.messages == ["tool t failed"]


async def test_a_structured_result_is_passed_as_it_is() -> None:
    async def structured(args: dict[str, Any], ctx: ToolContext) -> mcp.CallToolResult:
        return mcp.CallToolResult(content=[mcp.TextContent("7")], structuredContent={"n": 7})

    got = await result(_server_with(structured), calling("t", {}))
    assert got["structuredContent"] == {"n": 7}
    assert "isError" not in got


async def test_a_result_that_cannot_be_encoded_fails_that_request_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def unencodable(args: dict[str, Any], ctx: ToolContext) -> mcp.CallToolResult:
        return mcp.CallToolResult(content=[mcp.TextContent("x")], structuredContent={"n": object()})

    server = _server_with(unencodable)
    with caplog.at_level(logging.ERROR, "mcpd.demo"):
        msg, code = await answer(server, calling("t", {}, rid=5))
    assert (code, msg) == (
        rpc.INTERNAL_ERROR,
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": rpc.INTERNAL_ERROR, "message": "Internal error"},
        },
    )
    assert caplog.messages == ["tools/call failed"]
    assert "result" in (await answer(server, modern(6, "tools/list")))[0]


async def test_params_of_the_wrong_shape_are_invalid_params() -> None:
    request = req(1, "tools/call", {"name": 5, "_meta": meta()})
    msg, code = await answer(named("a"), request)
    assert code == rpc.INVALID_PARAMS
    assert msg["error"]["message"].startswith("Invalid params: ")


@pytest.mark.parametrize(
    ("token", "sent"),
    [("p1", True), (7, True), (None, False), (True, False), (1.5, False)],
)
async def test_progress_goes_out_only_for_a_token_the_client_gave(token: Any, sent: bool) -> None:
    async def slow(args: dict[str, Any], ctx: ToolContext) -> str:
        await ctx.progress(1, 2, "half")
        await ctx.progress(2)
        return "done"

    notes = Notes()
    m = {} if token is None else {"progressToken": token}
    msg, _ = await answer(_server_with(slow), calling("t", {}, **m), notes=notes)
    assert texts(msg["result"]) == "done"
    if not sent:
        assert notes.sent == []
        return
    assert [n["params"] for n in notes.sent] == [
        {"progressToken": token, "progress": 1, "total": 2, "message": "half"},
        {"progressToken": token, "progress": 2},
    ]


# The methods of each era


async def test_a_request_without_meta_before_initialize_is_refused() -> None:
    msg, code = await answer(named("a"), req(1, "tools/list"))
    assert code == rpc.INVALID_PARAMS
    assert "must carry" in msg["error"]["message"]


INITIALIZE = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "c", "version": "0"},
}


async def test_ping_is_a_legacy_method_and_discover_a_modern_one() -> None:
    server = named("a")
    session = server.new_session()
    init = {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "0"},
    }
    msg, code = await answer(server, req(1, "initialize", init), session)
    assert code is None and msg["result"]["protocolVersion"] == LEGACY
    assert (await answer(server, req(2, "ping"), session)) == (
        {"jsonrpc": "2.0", "id": 2, "result": {}},
        None,
    )
    refused, code = await answer(server, req(3, "server/discover"), session)
    assert (code, refused["error"]["data"]) == (rpc.METHOD_NOT_FOUND, "server/discover")

    discovered = await result(server, modern(4, "server/discover"))
    assert "tools" in discovered["capabilities"]
    for method in ("ping", "prompts/list"):
        msg, code = await answer(server, modern(5, method))
        assert (code, msg["error"]["message"]) == (rpc.METHOD_NOT_FOUND, "Method not found")


# Announcements of a changing list


async def test_changes_are_announced_once_however_many_came_between_reads() -> None:
    server = named("a")
    heard: list[dict[str, Any]] = []
    reading = trio.Event()
    go_on = trio.Event()

    async def notify(message: bytes) -> None:
        heard.append(json.loads(message))
        reading.set()
        await go_on.wait()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.announce_tool_changes, notify, "S")
            server.add_tool(ToolDef("b", "b.", object_schema({}), _quiet))
            await reading.wait()
            # While the first announcement is being sent, three more changes come.
            for name in ("c", "d", "e"):
                server.add_tool(ToolDef(name, ".", object_schema({}), _quiet))
            go_on.set()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert len(heard) == 2
    assert heard[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {mcp.KEY_SUBSCRIPTION_ID: "S"}},
    }


async def test_a_listen_acknowledges_only_what_it_honours() -> None:
    server = named("a")
    notes = Notes()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer, server, modern("L", "subscriptions/listen"), None, notes)
            await trio.testing.wait_all_tasks_blocked()
            server.add_tool(ToolDef("b", "b.", object_schema({}), _quiet))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert notes.sent == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {mcp.KEY_SUBSCRIPTION_ID: "L"}, "notifications": {}},
        }
    ]


async def test_a_listen_for_list_changes_hears_them_after_its_acknowledgement() -> None:
    server = named("a")
    notes = Notes()
    listen = modern("L", "subscriptions/listen", notifications={"toolsListChanged": True})
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer, server, listen, None, notes)
            await trio.testing.wait_all_tasks_blocked()
            server.add_tool(ToolDef("b", "b.", object_schema({}), _quiet))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert [n["method"] for n in notes.sent] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
    ]
    assert notes.sent[0]["params"]["notifications"] == {"toolsListChanged": True}


def test_a_tools_wire_form_leaves_out_what_it_lacks() -> None:
    tool = ToolDef("n", "D.", {"type": "object"}, _quiet)
    assert msgspec.json.decode(msgspec.json.encode(tool.wire())) == {
        "name": "n",
        "description": "D.",
        "inputSchema": {"type": "object"},
    }
