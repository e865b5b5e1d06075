"""MCP's message types for both eras (``protocol.mcp.core``): what a server's or an agent's
message decodes to, what is refused and where, which parts pass through byte for
byte, and what mcpd's own messages look like on the wire."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


def decode(data: Any, type_: type[Any]) -> Any:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return rpc.decode_as(raw, type_)


def wire(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def test_every_version_is_of_one_era() -> None:
    assert set(mcp.MODERN_VERSIONS).isdisjoint(mcp.LEGACY_VERSIONS)
    assert mcp.LATEST_MODERN in mcp.MODERN_VERSIONS
    assert mcp.LATEST_LEGACY in mcp.LEGACY_VERSIONS


def test_request_meta_carries_the_version_capabilities_and_who_asks() -> None:
    info = mcp.Implementation(name="mcpd", version="1")
    meta = mcp.request_meta("2026-07-28", {"elicitation": {}}, info)
    assert wire(meta) == {
        mcp.KEY_PROTOCOL_VERSION: "2026-07-28",
        mcp.KEY_CLIENT_CAPABILITIES: {"elicitation": {}},
        mcp.KEY_CLIENT_INFO: {"name": "mcpd", "version": "1"},
    }
    assert mcp.KEY_CLIENT_INFO not in mcp.request_meta("2026-07-28", {})


def test_request_meta_keeps_other_keys_but_its_own_version_and_capabilities_win() -> None:
    extra = {
        "progressToken": 7,
        "traceparent": "00-abc",
        mcp.KEY_PROTOCOL_VERSION: "1999-01-01",
        mcp.KEY_CLIENT_CAPABILITIES: {"sampling": {}},
    }
    kept = dict(extra)
    meta = mcp.request_meta("2026-07-28", {}, None, extra)
    assert meta[mcp.KEY_PROTOCOL_VERSION] == "2026-07-28"
    assert meta[mcp.KEY_CLIENT_CAPABILITIES] == {}
    assert meta["progressToken"] == 7 and meta["traceparent"] == "00-abc"
    assert extra == kept  # the caller's mapping is not written to


@pytest.mark.parametrize(
    ("written", "ttl"),
    [
        (b"3600000", 3600000),
        (b"0", 0),
        (b"-5", 0),  # negative: 0, as the spec says
        (b"null", 0),
        (b"6e4", 60000),  # a whole number, written as JSON may write one
        (b"1e20", 10**20),
        (b"1" + b"0" * 30, 10**30),  # any size is kept
    ],
)
def test_a_ttl_that_is_a_whole_number_is_kept(written: bytes, ttl: int) -> None:
    assert mcp.ttl_of(msgspec.Raw(written)) == (ttl, None)
    assert mcp.ttl_of(UNSET) == (0, None)


@pytest.mark.parametrize(
    "written", [b"1.5", b'"3600"', b"true", b"[60]", b'{"ms":60}', b"1e400", b"-1e400"]
)
def test_a_ttl_that_is_no_whole_number_is_0_and_says_why(written: bytes) -> None:
    ttl, wrong = mcp.ttl_of(msgspec.Raw(written))
    assert ttl == 0 and wrong is not None and "is no whole number of milliseconds" in wrong
    # Whatever a server writes there, a result carrying it decodes.
    page = rpc.decode_as(b'{"ttlMs":' + written + b"}", mcp.ListToolsPage)
    assert mcp.ttl_of(page.ttlMs) == (ttl, wrong)


def test_legacy_initialize_messages_decode_and_their_server_info_must_be_whole() -> None:
    params = decode(
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "host", "version": "2", "title": "Host"},
        },
        mcp.InitializeParams,
    )
    assert params.protocolVersion == "2025-11-25"
    assert params.clientInfo == mcp.Implementation(name="host", version="2", title="Host")
    result = decode(
        {"protocolVersion": "2025-06-18", "serverInfo": {"name": "s", "version": "0"}},
        mcp.InitializeResult,
    )
    assert result.serverInfo.name == "s" and result.capabilities == {}
    assert result.instructions is UNSET
    for bad, where in (
        ({}, "protocolVersion"),
        ({"protocolVersion": 20250618}, "$.protocolVersion"),
        ({"protocolVersion": "v", "serverInfo": {"name": "s"}}, "version"),
        ({"protocolVersion": "v", "serverInfo": {"name": 1, "version": "1"}}, "$.serverInfo.name"),
        ({"protocolVersion": "v", "serverInfo": "s"}, "$.serverInfo"),
    ):
        with pytest.raises(rpc.InvalidParams) as caught:
            decode(bad, mcp.InitializeResult)
        assert where in str(caught.value)


def test_an_implementation_sends_only_the_fields_it_has() -> None:
    assert wire(mcp.Implementation(name="a", version="1")) == {"name": "a", "version": "1"}
    full = mcp.Implementation("a", "1", title="A", description="d", websiteUrl="https://a")
    assert wire(full)["websiteUrl"] == "https://a"
    assert decode(wire(full), mcp.Implementation) == full


def test_a_tools_passed_through_parts_keep_their_exact_bytes() -> None:
    line = (
        b'{"name":"t","inputSchema":{ "type" : "object","properties":{"a":{"x-k":[1, 2.50]}}},'
        b'"outputSchema":{"type":"array"},"icons":[{"src":"data:,x"}],'
        b'"execution":{"taskSupport":"optional"},"_meta":{"k":"v"}}'
    )
    tool = decode(line, mcp.Tool)
    assert bytes(tool.inputSchema) == (b'{ "type" : "object","properties":{"a":{"x-k":[1, 2.50]}}}')
    assert bytes(tool.outputSchema) == b'{"type":"array"}'
    assert bytes(tool.icons) == b'[{"src":"data:,x"}]'
    assert bytes(tool.execution) == b'{"taskSupport":"optional"}'
    again = msgspec.json.encode(tool)
    assert b'{ "type" : "object","properties":{"a":{"x-k":[1, 2.50]}}}' in again
    assert decode(again, mcp.Tool) == tool


def test_a_tool_without_an_input_schema_gets_the_empty_object_schema() -> None:
    tool = decode({"name": "t"}, mcp.Tool)
    assert json.loads(bytes(tool.inputSchema)) == {"type": "object"}
    assert wire(mcp.Tool(name="t")) == {"name": "t", "inputSchema": {"type": "object"}}


def test_a_tools_fields_outside_the_schema_do_not_reach_the_other_side() -> None:
    tool = decode(
        {"name": "t", "description": "d", "x-vendor": {"override": True}, "serverInfo": "me"},
        mcp.Tool,
    )
    assert wire(tool) == {"name": "t", "description": "d", "inputSchema": {"type": "object"}}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", None),
        ("name", 5),
        ("name", ["t"]),
        ("title", 5),
        ("description", {"en": "x"}),
        ("annotations", ["readOnlyHint"]),
        ("annotations", "readOnly"),
        ("_meta", "m"),
        ("_meta", [1]),
    ],
)
def test_a_tool_with_a_field_of_the_wrong_type_is_refused_naming_it(field: str, value: Any) -> None:
    tool: dict[str, Any] = {"name": "t", field: value}
    with pytest.raises(rpc.InvalidParams) as caught:
        decode(tool, mcp.Tool)
    assert f"$.{field}" in str(caught.value)


def test_a_tool_without_a_name_is_refused() -> None:
    with pytest.raises(rpc.InvalidParams, match="name"):
        decode({"description": "no name"}, mcp.Tool)
    for not_an_object in ([], "t", 1, None):
        with pytest.raises(rpc.InvalidParams):
            decode(not_an_object, mcp.Tool)


def test_null_title_description_and_annotations_are_taken_as_absent_values() -> None:
    tool = decode(
        {"name": "t", "title": None, "description": None, "annotations": None, "_meta": None},
        mcp.Tool,
    )
    assert tool.title is None and tool.description is None
    assert tool.annotations is None and tool.meta is None


def test_huge_strings_decode_whole() -> None:
    big = "é" * 1_000_000
    tool = decode({"name": "t", "description": big}, mcp.Tool)
    assert tool.description == big


@pytest.mark.parametrize("type_", [mcp.Tool, mcp.DiscoverResult, mcp.CallToolParams])
def test_deep_nesting_is_a_refusal_not_a_crash(type_: type[Any]) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    body = b'{"name":"t","_meta":{"k":' + deep + b"}}"
    with pytest.raises(rpc.InvalidParams, match="malformed JSON"):
        rpc.decode_as(body, type_)


def test_nesting_inside_a_raw_part_is_refused_too() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(rpc.InvalidParams):
        rpc.decode_as(b'{"name":"t","inputSchema":' + deep + b"}", mcp.Tool)


def test_a_tools_page_keeps_each_tool_raw_so_one_bad_tool_cannot_sink_it() -> None:
    page = rpc.decode_as(
        b'{"tools":[{"name":"good"},5,null,{"name":3}],"nextCursor":"c2"}', mcp.ListToolsPage
    )
    assert [bytes(t) for t in page.tools] == [b'{"name":"good"}', b"5", b"null", b'{"name":3}']
    assert page.nextCursor == "c2"


def test_an_empty_cursor_is_a_cursor_and_only_an_absent_or_null_one_ends_the_list() -> None:
    assert decode({"nextCursor": ""}, mcp.ListToolsPage).nextCursor == ""
    assert decode({"nextCursor": None}, mcp.ListToolsPage).nextCursor is None
    assert decode({}, mcp.ListToolsPage).nextCursor is UNSET
    assert decode({}, mcp.ListToolsPage).tools == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tools", {"a": {}}),
        ("tools", "tools"),
        ("tools", None),
        ("nextCursor", 2),
        ("nextCursor", ["c"]),
        ("cacheScope", False),
        ("_meta", 1),
    ],
)
def test_a_tools_page_with_a_field_of_the_wrong_type_is_refused_naming_it(
    field: str, value: Any
) -> None:
    with pytest.raises(rpc.InvalidParams) as caught:
        decode({field: value}, mcp.ListToolsPage)
    assert f"$.{field}" in str(caught.value)


def test_what_mcpd_lists_and_asks_for_sends_only_what_it_set() -> None:
    assert wire(mcp.ListToolsResult(tools=[])) == {"tools": []}
    assert wire(mcp.ListToolsResult(tools=[], nextCursor="n", ttlMs=0)) == {
        "tools": [],
        "nextCursor": "n",
        "ttlMs": 0,
    }
    assert wire(mcp.ListParams()) == {}
    assert wire(mcp.ListParams(cursor="")) == {"cursor": ""}
    assert wire(mcp.MetaOnlyParams()) == {}


def test_a_calls_arguments_responses_and_state_pass_through_byte_for_byte() -> None:
    line = (
        b'{"name":"t","arguments":{"b":1, "a":[true,null,1.0e3]},'
        b'"inputResponses":{"k":{"action":"accept"}},"requestState":"opaque\\u0000",'
        b'"_meta":{"progressToken":1}}'
    )
    params = rpc.decode_as(line, mcp.CallToolParams)
    assert bytes(params.arguments) == b'{"b":1, "a":[true,null,1.0e3]}'
    assert bytes(params.inputResponses) == b'{"k":{"action":"accept"}}'
    assert bytes(params.requestState) == b'"opaque\\u0000"'
    again = msgspec.json.encode(params)
    assert b'"requestState":"opaque\\u0000"' in again
    assert b'"arguments":{"b":1, "a":[true,null,1.0e3]}' in again
    assert wire(mcp.CallToolParams(name="t")) == {"name": "t"}


def test_a_call_without_a_name_or_with_a_bad_one_or_bad_meta_is_refused() -> None:
    for bad, where in (
        ({}, "name"),
        ({"name": None}, "$.name"),
        ({"name": 1}, "$.name"),
        ({"name": "t", "_meta": None}, "$._meta"),
        ({"name": "t", "_meta": ["x"]}, "$._meta"),
    ):
        with pytest.raises(rpc.InvalidParams) as caught:
            decode(bad, mcp.CallToolParams)
        assert where in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("resultType", 1),
        ("isError", "true"),
        ("isError", 1),
        ("inputRequests", ["x"]),
        ("content", {"type": "text"}),
        ("content", [1]),
        ("content", ["text"]),
    ],
)
def test_a_result_with_a_field_of_the_wrong_type_is_refused_naming_it(
    field: str, value: Any
) -> None:
    for type_ in (mcp.CallToolResultKinds, mcp.CallToolResultHead):
        with pytest.raises(rpc.InvalidParams) as caught:
            decode({field: value}, type_)
        assert f"$.{field}" in str(caught.value)


def test_a_short_results_texts_stay_json_and_a_long_ones_are_read_as_strings() -> None:
    line = b'{"content":[{"type":"text","text":"a\\nb"},{"type":"text","text":5},{}]}'
    kinds = rpc.decode_as(line, mcp.CallToolResultKinds)
    assert [b.type for b in kinds.content] == ["text", "text", ""]
    assert [bytes(b.text) if b.text is not UNSET else None for b in kinds.content] == [
        b'"a\\nb"',
        b"5",
        None,
    ]
    with pytest.raises(rpc.InvalidParams, match=r"\$\.content\[1\]\.text"):
        rpc.decode_as(line, mcp.CallToolResultHead)


def test_an_embedded_resources_text_is_read_and_a_blob_is_not() -> None:
    head = decode(
        {
            "content": [
                {"type": "resource", "resource": {"uri": "f:///a", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "f:///b", "blob": "AAAA"}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ],
            "isError": None,
        },
        mcp.CallToolResultHead,
    )
    assert head.content[0].resource.text == "hello"
    assert head.content[1].resource.text is UNSET
    assert head.content[2].type == "image" and head.content[2].resource is UNSET
    assert head.isError is None
    with pytest.raises(rpc.InvalidParams, match=r"\$\.content\[0\]\.resource"):
        decode({"content": [{"type": "resource", "resource": "f:///a"}]}, mcp.CallToolResultHead)


def test_the_results_mcpd_writes_itself() -> None:
    assert wire(mcp.text_result("hi")) == {"content": [{"type": "text", "text": "hi"}]}
    assert wire(mcp.text_result("no", is_error=True, meta={"k": 1})) == {
        "content": [{"type": "text", "text": "no"}],
        "isError": True,
        "_meta": {"k": 1},
    }
    assert "_meta" not in wire(mcp.text_result("hi", meta={}))
    assert wire(mcp.CallToolResult(content=[], structuredContent=None)) == {
        "content": [],
        "structuredContent": None,
    }
    # what it writes reads back as a failed result of no other kind
    fate = rpc.decode_as(
        msgspec.json.encode(mcp.text_result("x", is_error=True)), mcp.CallToolResultHead
    )
    assert fate.resultType is UNSET and fate.isError is True


def test_progress_keeps_numbers_as_they_came() -> None:
    p = rpc.decode_as(b'{"progressToken":"t","progress":3,"total":10.0}', mcp.ProgressParams)
    assert msgspec.json.encode(p) == b'{"progressToken":"t","progress":3,"total":10.0}'
    p = rpc.decode_as(b'{"progressToken":7,"progress":0.5,"message":"half"}', mcp.ProgressParams)
    assert (p.progressToken, p.progress, p.message) == (7, 0.5, "half")


@pytest.mark.parametrize(
    "params",
    [
        b"{}",
        b'{"progressToken":"t"}',
        b'{"progressToken":true,"progress":1}',
        b'{"progressToken":null,"progress":1}',
        b'{"progressToken":1.5,"progress":1}',
        b'{"progressToken":"t","progress":"50%"}',
        b'{"progressToken":"t","progress":1e400}',
        b'{"progressToken":"t","progress":1,"total":[100]}',
        b'{"progressToken":"t","progress":1,"message":{"text":"x"}}',
        b"[]",
        b"not json",
    ],
)
def test_progress_that_is_not_progress_is_refused(params: bytes) -> None:
    with pytest.raises(rpc.InvalidParams):
        rpc.decode_as(params, mcp.ProgressParams)


def test_a_cancellation_names_a_string_or_integer_request() -> None:
    assert decode({"requestId": "a", "reason": "r"}, mcp.CancelledParams).requestId == "a"
    assert decode({"requestId": 3}, mcp.CancelledParams).requestId == 3
    assert decode({}, mcp.CancelledParams).requestId is UNSET
    assert rpc.decode_as(None, mcp.CancelledParams).requestId is UNSET
    for bad in (None, 1.0, True, ["a"], {"id": 1}):
        with pytest.raises(rpc.InvalidParams, match=r"\$\.requestId"):
            decode({"requestId": bad}, mcp.CancelledParams)
    with pytest.raises(rpc.InvalidParams, match=r"\$\.reason"):
        decode({"requestId": 1, "reason": 5}, mcp.CancelledParams)


def test_meta_only_params_take_an_object_or_nothing() -> None:
    assert decode({}, mcp.MetaOnlyParams).meta is UNSET
    assert decode({"_meta": {"a": [1]}, "other": 1}, mcp.MetaOnlyParams).meta == {"a": [1]}
    for bad in (None, "m", [1], 2):
        with pytest.raises(rpc.InvalidParams, match=r"\$\._meta"):
            decode({"_meta": bad}, mcp.MetaOnlyParams)
