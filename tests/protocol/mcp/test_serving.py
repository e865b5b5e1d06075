"""The server side of the lifecycle (``protocol.mcp.serving``), sans-IO: each request's era
told from its ``_meta`` (or from an earlier ``initialize``), bad or hostile envelopes
refused with an error that says what is wrong, versions negotiated, and results shaped
the way each era expects them."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

INFO = mcp.Implementation(name="mcpd", version="1")
MODERN = mcp.MODERN_VERSIONS[0]


def session(**kw: Any) -> AgentSession:
    return AgentSession(INFO, {"tools": {}, "extensions": {"x/y": {}}}, "use me well", **kw)


def request(params: Any, method: str = "tools/list") -> rpc.Request:
    raw = None if params is None else Raw(json.dumps(params).encode())
    return rpc.Request(1, method, raw)


def meta(version: Any = MODERN, caps: Any = None, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {mcp.KEY_PROTOCOL_VERSION: version, **more}
    out[mcp.KEY_CLIENT_CAPABILITIES] = {} if caps is None else caps
    return out


def refused(s: AgentSession, params: Any) -> rpc.RPCError:
    with pytest.raises(rpc.RPCError) as error:
        s.context(request(params))
    return error.value


# -- the era of each request --


def test_a_modern_request_is_known_by_its_meta() -> None:
    ctx = session().context(request({"_meta": meta(caps={"sampling": {}})}))
    assert ctx.era == "modern" and ctx.version == MODERN
    assert ctx.capabilities == {"sampling": {}}


def test_a_request_with_no_meta_before_initialize_is_told_what_it_lacks() -> None:
    s = session()
    for params in (None, {}, {"cursor": "x"}):
        error = refused(s, params)
        assert error.code == rpc.INVALID_PARAMS
        assert mcp.KEY_PROTOCOL_VERSION in error.message and "initialize" in error.message


def test_after_initialize_a_request_with_no_meta_is_of_the_version_agreed() -> None:
    s = session()
    s.initialize(
        Raw(json.dumps({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}}).encode())
    )
    ctx = s.context(request(None))
    assert ctx.era == "legacy" and ctx.version == "2025-06-18"
    assert ctx.capabilities == {"roots": {}}
    # A modern request on the same connection is still modern.
    assert s.context(request({"_meta": meta()})).era == "modern"


def test_an_unknown_or_legacy_version_in_meta_is_refused_naming_what_is_supported() -> None:
    s = session()
    for version in ("1999-01-01", mcp.LATEST_LEGACY, 20260728, ["x"]):
        error = refused(s, {"_meta": meta(version)})
        assert error.code == rpc.UNSUPPORTED_PROTOCOL_VERSION
        data = msgspec.json.decode(msgspec.json.encode(error.data))
        # A legacy version named in _meta is refused whatever is offered: only the
        # versions a request with _meta can use are.
        usable = list(mcp.MODERN_VERSIONS) if version == mcp.LATEST_LEGACY else s.supported
        assert data["requested"] == version and data["supported"] == usable


def test_a_modern_request_without_capabilities_as_an_object_is_refused() -> None:
    s = session()
    caps: Any
    for caps in ([], "all", None):
        m = meta()
        m[mcp.KEY_CLIENT_CAPABILITIES] = caps
        error = refused(s, {"_meta": m})
        assert error.code == rpc.INVALID_PARAMS and mcp.KEY_CLIENT_CAPABILITIES in error.message
    m = meta()
    del m[mcp.KEY_CLIENT_CAPABILITIES]
    assert refused(s, {"_meta": m}).code == rpc.INVALID_PARAMS


def test_params_that_are_not_an_object_are_refused_not_raised() -> None:
    s = session()
    for raw in (b"[1,2]", b'"x"', b"{", b'{"_meta": 5}', b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(rpc.RPCError) as error:
            s.context(rpc.Request(1, "tools/list", Raw(raw)))
        assert error.value.code == rpc.INVALID_PARAMS


def test_a_progress_token_is_a_string_or_an_integer_and_nothing_else() -> None:
    def token(value: Any) -> str | int | None:
        m = {} if value is UNSET else {mcp.KEY_PROGRESS_TOKEN: value}
        return RequestContext("modern", MODERN, m, {}).progress_token

    assert token("abc") == "abc" and token(7) == 7 and token(0) == 0
    for bad in (True, False, 1.5, None, {"a": 1}, [1], UNSET):
        assert token(bad) is None


# -- initialize and discover --


def test_initialize_agrees_on_the_version_asked_when_it_knows_it_else_its_latest() -> None:
    s = session()
    for asked, agreed in (
        ("2025-03-26", "2025-03-26"),
        ("2030-01-01", mcp.LEGACY_VERSIONS[0]),
        (MODERN, mcp.LEGACY_VERSIONS[0]),
    ):
        params = {"protocolVersion": asked, "clientInfo": {"name": "c", "version": "2"}}
        result = s.initialize(Raw(json.dumps(params).encode()))
        assert result.protocolVersion == agreed and s.legacy_version == agreed
    assert isinstance(s.client_info, mcp.Implementation) and s.client_info.name == "c"


def test_initialize_tells_a_legacy_client_no_extensions_and_its_instructions() -> None:
    result = session().initialize(Raw(b'{"protocolVersion":"2025-11-25"}'))
    assert result.capabilities == {"tools": {}}
    assert result.serverInfo == INFO and result.instructions == "use me well"
    assert (
        AgentSession(INFO, {}, "").initialize(Raw(b'{"protocolVersion":"2025-11-25"}')).instructions
        is UNSET
    )


def test_a_malformed_initialize_is_refused_and_leaves_the_connection_as_it_was() -> None:
    s = session()
    bad = (
        None,
        b"[]",
        b'{"protocolVersion": 5}',
        b'{"protocolVersion":"2025-11-25","capabilities":[]}',
        b'{"protocolVersion":"2025-11-25","clientInfo":"me"}',
    )
    for raw in bad:
        with pytest.raises(rpc.InvalidParams):
            s.initialize(None if raw is None else Raw(raw))
    assert s.legacy_version is None and s.client_info is None
    assert refused(s, None).code == rpc.INVALID_PARAMS


def test_discover_offers_the_modern_versions_and_is_cacheable() -> None:
    s = session(ttl_ms=5000, cache_scope="private")
    ctx = s.context(request({"_meta": meta()}))
    result = s.discover(ctx)
    assert result.supportedVersions == list(mcp.MODERN_VERSIONS)
    assert result.capabilities == {"tools": {}, "extensions": {"x/y": {}}}
    assert result.instructions == "use me well"
    assert result.resultType == mcp.COMPLETE
    assert result.ttlMs == 5000 and result.cacheScope == "private"
    assert result.meta is not UNSET and result.meta[mcp.KEY_SERVER_INFO] == INFO


# -- results shaped for each era --


def test_a_modern_result_gets_its_type_and_server_and_keeps_what_was_set() -> None:
    s = session(ttl_ms=100)
    ctx = s.context(request({"_meta": meta()}))
    given = mcp.ListToolsResult(tools=[], ttlMs=7, meta={"mine": 1}, resultType="task")
    done = s.complete(ctx, given, cacheable=True)
    assert done.resultType == "task" and done.ttlMs == 7 and done.cacheScope == "public"
    assert done.meta == {"mine": 1, mcp.KEY_SERVER_INFO: INFO}
    assert given.meta == {"mine": 1}  # the caller's own is left alone
    plain = s.complete(ctx, mcp.ListToolsResult(tools=[]))
    assert plain.resultType == mcp.COMPLETE and plain.ttlMs is UNSET


def test_a_legacy_result_is_returned_as_it_was() -> None:
    s = session()
    s.initialize(Raw(b'{"protocolVersion":"2025-11-25"}'))
    ctx = s.context(request(None))
    given = mcp.ListToolsResult(tools=[])
    assert s.complete(ctx, given, cacheable=True) is given
    assert s.finish(ctx, {"content": []}) == {"content": []}


def test_a_modern_dict_result_gets_its_type_and_server_and_keeps_what_was_set() -> None:
    s = session()
    ctx = s.context(request({"_meta": meta()}))
    out = s.finish(ctx, {"content": [], "resultType": "input_required", "_meta": {"k": 1}})
    assert out["resultType"] == "input_required"
    assert out["_meta"] == {"k": 1, mcp.KEY_SERVER_INFO: INFO}
