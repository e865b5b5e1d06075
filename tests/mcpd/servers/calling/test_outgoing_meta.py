"""The ``_meta`` mcpd writes on the requests it sends a server for agents: a modern
server gets the envelope (version, the agent's capabilities, mcpd's client info, the
log level) with the agent's own keys, a legacy one the agent's own keys alone; the
reserved keys an agent sends are never passed on; a progress token is mcpd's; and the
Mcp-Param-* headers mirror the arguments or refuse a value no header can carry."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from mcpd.servers.calling.outgoing_meta import CallMeta
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.parts.calls import a_call

VERSION = mcp.LATEST_MODERN
FORGED = {
    mcp.KEY_PROTOCOL_VERSION: "1999-01-01",
    mcp.KEY_CLIENT_CAPABILITIES: {"sampling": {}},
    mcp.KEY_CLIENT_INFO: {"name": "not-mcpd", "version": "0"},
    mcp.KEY_LOG_LEVEL: "debug",
}


def modern(level: str | None = None) -> CallMeta:
    meta = CallMeta()
    meta.adopt("modern", VERSION)
    meta.log_level = level
    return meta


def legacy() -> CallMeta:
    meta = CallMeta()
    meta.adopt("legacy", "2025-06-18")
    return meta


def plain(meta: object) -> Any:
    return msgspec.json.decode(msgspec.json.encode(meta))


# -- legacy --


def test_a_legacy_server_gets_only_the_agents_own_keys() -> None:
    own = {"trace": "abc", **FORGED}
    assert legacy().of({"roots": {}}, own) == {"trace": "abc"}


def test_a_legacy_server_gets_no_meta_when_the_agent_has_none_of_its_own() -> None:
    assert legacy().of({"roots": {}}, None) is UNSET
    assert legacy().of(None, {}) is UNSET
    assert legacy().of(None, FORGED) is UNSET


def test_before_the_handshake_a_request_carries_only_the_agents_keys() -> None:
    assert CallMeta().of(None, {"trace": 1}) == {"trace": 1}


# -- modern --


def test_a_modern_server_gets_the_envelope() -> None:
    meta = plain(modern().of({"elicitation": {}}, None))
    assert meta[mcp.KEY_PROTOCOL_VERSION] == VERSION
    assert meta[mcp.KEY_CLIENT_CAPABILITIES] == {"elicitation": {}}
    assert meta[mcp.KEY_CLIENT_INFO]["name"] == "mcpd"
    assert mcp.KEY_LOG_LEVEL not in meta


def test_an_agent_cannot_forge_the_envelopes_keys() -> None:
    for level in (None, "warning"):
        meta = plain(modern(level).of({"roots": {}}, {"trace": "t", **FORGED}))
        assert meta["trace"] == "t"
        assert meta[mcp.KEY_PROTOCOL_VERSION] == VERSION
        assert meta[mcp.KEY_CLIENT_CAPABILITIES] == {"roots": {}}
        assert meta[mcp.KEY_CLIENT_INFO]["name"] == "mcpd"
        assert meta.get(mcp.KEY_LOG_LEVEL) == level


def test_the_log_level_agents_want_is_on_every_modern_request() -> None:
    meta = plain(modern("error").of(None, None))
    assert meta[mcp.KEY_LOG_LEVEL] == "error"
    assert meta[mcp.KEY_CLIENT_CAPABILITIES] == {}


def test_the_common_calls_envelope_is_made_once() -> None:
    meta = modern()
    first = meta.of(None, None)
    assert meta.of({}, {mcp.KEY_PROTOCOL_VERSION: "x"}) is first  # nothing of its own
    assert meta.of({"roots": {}}, None) is not first
    assert meta.of(None, {"trace": 1}) is not first
    meta.adopt("modern", "2099-01-01")  # a new handshake, a new envelope
    assert plain(meta.of(None, None))[mcp.KEY_PROTOCOL_VERSION] == "2099-01-01"


# -- the constant parts of a tools/call --


def body(meta: CallMeta, name: str, token: str | None = None) -> Any:
    line = meta.shape(name).request(7, Raw(b'{"q":1}'), token)
    return msgspec.json.decode(bytes(line))


def test_a_calls_shape_carries_the_eras_meta_and_is_kept_per_tool() -> None:
    meta = modern()
    assert meta.shape("t") is meta.shape("t")
    sent = body(meta, "t", "mcpd-s-1")
    assert sent["params"]["name"] == "t"
    assert sent["params"]["_meta"]["progressToken"] == "mcpd-s-1"
    assert sent["params"]["_meta"][mcp.KEY_PROTOCOL_VERSION] == VERSION
    assert "_meta" not in body(legacy(), "t")["params"]


def test_a_new_log_level_or_handshake_remakes_the_shapes() -> None:
    meta = modern()
    before = meta.shape("t")
    meta.log_level = "info"
    assert meta.shape("t") is not before
    assert body(meta, "t")["params"]["_meta"][mcp.KEY_LOG_LEVEL] == "info"
    meta.adopt("legacy", "2025-06-18")
    assert "_meta" not in body(meta, "t")["params"]


# -- a call's params --


def test_the_agents_progress_token_is_replaced_by_mcpds() -> None:
    call, _ = a_call("t", meta={"progressToken": "agent-token", "trace": 1})
    call.progress_token = "mcpd-s-9"
    params = legacy().params(call)
    assert params.name == "t"
    assert params.meta == {"progressToken": "mcpd-s-9", "trace": 1}


def test_a_progress_token_nobody_takes_reports_for_is_not_sent() -> None:
    call, _ = a_call("t", meta={"progressToken": "agent-token"})
    assert legacy().params(call).meta is UNSET
    call, _ = a_call("t", meta={"progressToken": 5, "trace": 1})
    assert legacy().params(call).meta == {"trace": 1}


# -- Mcp-Param-* headers --


def with_headers() -> CallMeta:
    meta = modern()
    meta.param_paths["t"] = {"Mcp-Param-Region": ("region",), "Mcp-Param-Deep": ("a", "b")}
    return meta


def headers(meta: CallMeta, arguments: bytes | None) -> dict[str, str] | None:
    call, _ = a_call("t", UNSET if arguments is None else Raw(arguments))
    return meta.param_headers(call)


def test_arguments_are_mirrored_into_their_headers() -> None:
    meta = with_headers()
    assert headers(meta, b'{"region": "eu", "a": {"b": 3}}') == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Deep": "3",
    }
    assert headers(meta, b'{"region": null}') == {}


@pytest.mark.parametrize("arguments", [None, b"[1]", b'"eu"', b"{not json"])
def test_arguments_that_are_not_an_object_send_no_header(arguments: bytes | None) -> None:
    assert headers(with_headers(), arguments) == {}


def test_a_value_no_header_can_carry_refuses_the_call_as_invalid_params() -> None:
    with pytest.raises(rpc.RPCError) as info:
        headers(with_headers(), b'{"region": {"nested": 1}}')
    assert info.value.code == rpc.INVALID_PARAMS
    assert "Mcp-Param-Region" in info.value.message


def test_no_headers_for_a_tool_without_them_or_a_legacy_server() -> None:
    assert headers(modern(), b'{"region": "eu"}') is None
    meta = with_headers()
    meta.adopt("legacy", "2025-06-18")
    meta.param_paths["t"] = {"Mcp-Param-Region": ("region",)}
    assert headers(meta, b'{"region": "eu"}') is None
