"""What a client keeps of a server's greeting (``protocol.mcp.greeting``): the few
capabilities it acts on, read leniently, and nothing else of them, however large."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.features import TASKS_EXTENSION
from protocol.mcp.greeting import (
    VERSIONS_BYTES,
    Declared,
    Discovered,
    Initialized,
    ServerCapabilities,
    server_capabilities,
    server_info,
    supported_versions,
    versions_unread,
)


def discovered(result: dict[str, Any]) -> Discovered:
    return rpc.decode_as(msgspec.Raw(json.dumps(result).encode()), Discovered)


def declared(capabilities: dict[str, Any]) -> ServerCapabilities:
    return server_capabilities(discovered({"capabilities": capabilities}).capabilities)


def test_a_discover_result_as_the_spec_shows_it_is_read() -> None:
    result = discovered(
        {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "instructions": "be brief",
            "ttlMs": 3600000,
            "cacheScope": "public",
            "_meta": {mcp.KEY_SERVER_INFO: {"name": "S", "version": "1.0"}},
        }
    )
    assert supported_versions(result.supportedVersions) == ["2026-07-28"]
    assert server_capabilities(result.capabilities) == ServerCapabilities(
        tools_changed=True, logging=True
    )
    assert (result.instructions, result.cacheScope) == ("be brief", "public")
    assert mcp.ttl_of(result.ttlMs) == (3600000, None)
    assert server_info(result.meta) == {"name": "S", "version": "1.0"}


def test_a_bare_discover_result_leaves_what_it_omits_unset() -> None:
    result = discovered({})
    assert supported_versions(result.supportedVersions) == []
    assert result.capabilities == Declared()
    assert result.instructions is UNSET and result.ttlMs is UNSET and result.meta is UNSET
    # null instructions and ttl are told apart from absent ones
    nulls = discovered({"instructions": None, "ttlMs": None})
    assert nulls.instructions is None and mcp.ttl_of(nulls.ttlMs) == (0, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("capabilities", []),
        ("capabilities", "all"),
        ("instructions", {"text": "x"}),
        ("cacheScope", 1),
        ("resultType", ["complete"]),
        ("_meta", []),
        ("_meta", None),
    ],
)
def test_a_discover_result_with_a_field_of_the_wrong_type_is_refused_naming_it(
    field: str, value: Any
) -> None:
    with pytest.raises(rpc.InvalidParams) as caught:
        discovered({field: value})
    assert f"$.{field}" in str(caught.value)


@pytest.mark.parametrize("written", [b"3600000", b"6e4", b"1.5", b'"3600"', b"[60]", b"1e400"])
def test_whatever_a_server_writes_as_its_ttl_its_discover_result_is_read(
    written: bytes,
) -> None:
    result = rpc.decode_as(b'{"ttlMs":' + written + b"}", Discovered)
    assert mcp.ttl_of(result.ttlMs) == mcp.ttl_of(msgspec.Raw(written))


def test_each_capability_a_client_acts_on_is_read() -> None:
    assert declared(
        {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "logging": {},
            "tasks": {"requests": {"tools": {"call": {}}}},
            "extensions": {TASKS_EXTENSION: {}, "other/ext": {"x": 1}},
            "completions": {},
            "experimental": {"anything": [1, 2]},
        }
    ) == ServerCapabilities(
        tools_changed=True,
        prompts=True,
        prompts_changed=True,
        resources=True,
        resources_changed=True,
        subscribe=True,
        logging=True,
        tool_tasks=True,
        tasks=True,
    )
    assert declared({"prompts": {}, "resources": {}}) == ServerCapabilities(
        prompts=True, resources=True
    )


@pytest.mark.parametrize(
    "capabilities",
    [
        {"tools": {"listChanged": "yes"}},
        {"tools": True, "prompts": [], "resources": None, "logging": "on"},
        {"resources": {"subscribe": 1, "listChanged": {}}},
        {"tasks": {"requests": {"tools": {"call": True}}}},
        {"tasks": {"requests": []}},
        {"extensions": [TASKS_EXTENSION]},
        {"extensions": {TASKS_EXTENSION: True}},
    ],
)
def test_a_part_not_of_its_shape_counts_as_not_declared(capabilities: dict[str, Any]) -> None:
    got = declared(capabilities)
    assert not (got.tools_changed or got.prompts or got.logging or got.tool_tasks or got.tasks)
    assert not (got.subscribe or got.resources_changed)


def test_capabilities_that_are_not_an_object_are_no_greeting() -> None:
    for result in ({"capabilities": []}, {"protocolVersion": "x", "capabilities": 5}):
        with pytest.raises(rpc.InvalidParams):
            rpc.decode_as(msgspec.Raw(json.dumps(result).encode()), Initialized)


def test_megabytes_of_capabilities_leave_a_few_flags() -> None:
    pad = b",".join([b"{}"] * 300_000)
    text = b'{"capabilities":{"experimental":{"x":[' + pad + b']},"tools":{"listChanged":true}}}'
    result = rpc.decode_as(msgspec.Raw(text), Discovered)
    kept = server_capabilities(result.capabilities)
    assert kept == ServerCapabilities(tools_changed=True)
    assert len(msgspec.json.encode(kept)) < 512


def test_who_the_server_is_takes_its_strings_only() -> None:
    meta = {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": 2, "title": "T"}}
    assert server_info(discovered({"_meta": meta}).meta) == {"name": "s", "title": "T"}
    assert server_info(discovered({"_meta": {"x": 1}}).meta) is None
    assert server_info(discovered({}).meta) is None


def test_a_list_of_versions_is_read_only_when_it_is_short_and_of_strings() -> None:
    assert supported_versions(discovered({"supportedVersions": ["a", "b"]}).supportedVersions) == [
        "a",
        "b",
    ]
    for wrong in ([1], "2026-07-28", None):
        assert supported_versions(discovered({"supportedVersions": wrong}).supportedVersions) == []
    many = ["2026-07-28"] * VERSIONS_BYTES
    assert supported_versions(discovered({"supportedVersions": many}).supportedVersions) == []


def test_a_list_of_versions_too_long_to_read_says_its_size_and_the_most_read() -> None:
    many = discovered({"supportedVersions": ["2026-07-28"] * VERSIONS_BYTES})
    assert versions_unread(many.supportedVersions) == (
        f"its supportedVersions is {len(many.supportedVersions):,} bytes long, more than "
        "the 4,096 mcpd reads: which versions it speaks is not known"
    )
    for read in ({"supportedVersions": ["2026-07-28"]}, {"supportedVersions": [1]}, {}):
        assert versions_unread(discovered(read).supportedVersions) is None
