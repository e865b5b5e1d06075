"""The Streamable HTTP rules of the server end, called directly on the headers and
bodies a client could send to ``POST /mcp``: what a POST must carry, the statuses the
spec fixes, routing headers that disagree with the body (doubled, missing, forged,
encoded, not ASCII), versions that disagree, and bodies that are no request at all.
Every refusal is a status with a JSON-RPC error that names the problem."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcpd.agents.agent_server import new_session
from mcpd.agents.http.mcp_http import (
    MODERN_STATUS,
    accepts,
    check_post,
    decode_body,
    header_mismatch,
    modern_request,
)
from mcpd.agents.http.wire import Headers, Reject
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession

VERSION = mcp.LATEST_MODERN
META = {mcp.KEY_PROTOCOL_VERSION: VERSION, mcp.KEY_CLIENT_CAPABILITIES: {}}
ACCEPT = "application/json, text/event-stream"


def headers(*pairs: tuple[str, str]) -> Headers:
    return Headers((k.encode(), v.encode("latin-1")) for k, v in pairs)


def post_headers(method: str, name: str | None = None, *more: tuple[str, str]) -> Headers:
    pairs = [("Content-Type", "application/json"), ("Accept", ACCEPT), ("Mcp-Method", method)]
    if name is not None:
        pairs.append(("Mcp-Name", name))
    return headers(*pairs, *more)


def body(method: str, params: Any = None, rid: Any = 1) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode()


def request(method: str, params: Any = None) -> rpc.Request:
    msg = envelope.decode_message(body(method, params))
    assert isinstance(msg, rpc.Request)
    return msg


def session() -> AgentSession:
    return new_session()


def refusal(reject: Reject) -> tuple[int, Any, int, str]:
    reply = json.loads(reject.body)
    return reject.status, reply["id"], reply["error"]["code"], reply["error"]["message"]


def refused(hs: Headers, data: bytes, version: str = VERSION) -> tuple[int, Any, int, str]:
    with pytest.raises(Reject) as info:
        modern_request(hs, data, version, session())
    return refusal(info.value)


# -- what a POST carries --


@pytest.mark.parametrize(
    "content_type", ["application/json", "Application/JSON; charset=utf-8", " application/json ;x"]
)
def test_a_post_of_json_accepting_both_answers_passes(content_type: str) -> None:
    check_post(headers(("Content-Type", content_type), ("Accept", ACCEPT)))
    check_post(headers(("Content-Type", content_type), ("Accept", "application/*, text/*")))
    check_post(headers(("Content-Type", content_type), ("Accept", "*/*")))


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/jsonx", "json"])
def test_a_body_that_is_not_json_is_an_unsupported_media_type(content_type: str | None) -> None:
    pairs = [("Accept", ACCEPT)] + (
        [("Content-Type", content_type)] if content_type is not None else []
    )
    with pytest.raises(Reject) as info:
        check_post(headers(*pairs))
    status, rid, code, message = refusal(info.value)
    assert (status, rid, code) == (415, None, rpc.INVALID_REQUEST)
    assert message == "Unsupported Media Type: Content-Type must be application/json"


@pytest.mark.parametrize("coding", ["gzip", "br", "GZIP", "x-\x1b[2Jgz"])
def test_an_encoded_body_is_an_unsupported_media_type_naming_the_encoding(coding: str) -> None:
    with pytest.raises(Reject) as info:
        check_post(
            headers(
                ("Content-Type", "application/json"),
                ("Accept", ACCEPT),
                ("Content-Encoding", coding),
            )
        )
    status, rid, code, message = refusal(info.value)
    assert (status, rid, code) == (415, None, rpc.INVALID_REQUEST)
    assert message.startswith("Unsupported Media Type: the body is ")
    assert "-encoded (Content-Encoding), which mcpd does not read" in message
    assert "\x1b" not in message


def test_an_identity_encoded_body_passes() -> None:
    check_post(
        headers(
            ("Content-Type", "application/json"),
            ("Accept", ACCEPT),
            ("Content-Encoding", "identity"),
        )
    )


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "application/json",
        "text/event-stream",
        "image/*, text/html",
        "application/json-seq, text/event-streams",
    ],
)
def test_a_client_that_cannot_take_both_answers_is_not_acceptable(accept: str | None) -> None:
    pairs = [("Content-Type", "application/json")] + (
        [("Accept", accept)] if accept is not None else []
    )
    with pytest.raises(Reject) as info:
        check_post(headers(*pairs))
    status, _, code, message = refusal(info.value)
    assert (status, code) == (406, rpc.INVALID_REQUEST)
    assert message.startswith(
        "Not Acceptable: Accept must list application/json and text/event-stream"
    )


def test_accept_reads_each_listed_type_without_its_parameters() -> None:
    assert accepts("text/event-stream;q=0.5 , APPLICATION/JSON", "application/json")
    assert not accepts("application/jsonp", "application/json")
    assert not accepts(None, "application/json")


# -- the body --


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"{not json", rpc.PARSE_ERROR),
        (b"\xff\xfe{}", rpc.PARSE_ERROR),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', rpc.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1}', rpc.INVALID_REQUEST),
        (b'"just a string"', rpc.INVALID_REQUEST),
    ],
)
def test_a_body_that_is_no_message_is_a_bad_request(data: bytes, code: int) -> None:
    with pytest.raises(Reject) as info:
        decode_body(data)
    status, _, got, _ = refusal(info.value)
    assert (status, got) == (400, code)


def test_a_notification_is_accepted_with_nothing_to_answer() -> None:
    data = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    with pytest.raises(Reject) as info:
        modern_request(post_headers("notifications/initialized"), data, VERSION, session())
    assert (info.value.status, info.value.body) == (202, b"")


def test_a_response_posted_to_the_server_is_not_a_request() -> None:
    data = b'{"jsonrpc":"2.0","id":3,"result":{}}'
    assert refused(post_headers("ping"), data) == (
        400,
        None,
        rpc.INVALID_REQUEST,
        "Invalid request: not a request",
    )


def test_initialize_belongs_to_the_handshake() -> None:
    status, rid, code, message = refused(post_headers("initialize"), body("initialize", {}))
    assert (status, rid, code) == (400, 1, rpc.INVALID_REQUEST)
    assert "handshake protocol" in message


# -- the routing headers --


def test_a_request_whose_headers_agree_gives_its_request_and_context() -> None:
    params = {"name": "mcp__notes__search", "arguments": {}, "_meta": META}
    req, ctx = modern_request(
        post_headers("tools/call", "mcp__notes__search"),
        body("tools/call", params),
        VERSION,
        session(),
    )
    assert (req.id, req.method) == (1, "tools/call")
    assert (ctx.era, ctx.version) == ("modern", VERSION)


def test_a_name_outside_plain_ascii_travels_in_the_base64_form() -> None:
    uri = "file:///notes/caf\u00e9 \u2192 x.md"
    sentinel = "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
    req = request("resources/read", {"uri": uri, "_meta": META})
    assert header_mismatch(post_headers("resources/read", sentinel), req) is None


@pytest.mark.parametrize(
    ("hs", "why"),
    [
        (headers(), "Mcp-Method is missing"),
        (
            post_headers("tools/list"),
            "Mcp-Method is 'tools/list', the body's method is 'tools/call'",
        ),
        (
            post_headers("TOOLS/CALL"),
            "Mcp-Method is 'TOOLS/CALL', the body's method is 'tools/call'",
        ),
        (post_headers("tools/call"), "Mcp-Name is missing"),
        (
            post_headers("tools/call", "mcp__notes__delete"),
            "Mcp-Name is 'mcp__notes__delete', the body's name is 'mcp__notes__search'",
        ),
        (
            post_headers("tools/call", "mcp__notes__search", ("Mcp-Method", "tools/call")),
            "mcp-method appears more than once",
        ),
        (
            post_headers("tools/call", "mcp__notes__search", ("Mcp-Name", "mcp__notes__search")),
            "mcp-name appears more than once",
        ),
        (
            post_headers(
                "tools/call",
                "mcp__notes__search",
                ("MCP-Protocol-Version", VERSION),
                ("mcp-protocol-version", VERSION),
            ),
            "mcp-protocol-version appears more than once",
        ),
        (
            post_headers("tools/call", "mcp__notes__s\u00e9arch"),
            "Mcp-Name carries characters outside ASCII",
        ),
        (post_headers("tools/call", "=?base64?!!!?="), None),
    ],
)
def test_routing_headers_that_disagree_with_the_body_say_how(hs: Headers, why: str | None) -> None:
    req = request("tools/call", {"name": "mcp__notes__search", "arguments": {}, "_meta": META})
    said = header_mismatch(hs, req)
    if why is None:
        assert said is not None and said.startswith("Mcp-Name: bad base64 sentinel value")
    else:
        assert said == why


def test_a_forged_name_is_quoted_without_its_control_characters() -> None:
    forged = "\x1b[2J\u202eevil"
    sentinel = "=?base64?" + base64.b64encode(forged.encode()).decode() + "?="
    req = request("tools/call", {"name": "mcp__notes__search", "_meta": META})
    said = header_mismatch(post_headers("tools/call", sentinel), req)
    assert said is not None and said.isprintable() and "\\x1b[2J\\u202eevil" in said


def test_a_name_header_for_a_request_without_a_name_disagrees() -> None:
    req = request("tools/call", {"_meta": META})
    assert header_mismatch(post_headers("tools/call"), req) is None
    assert header_mismatch(post_headers("tools/call", "x"), req) == (
        "Mcp-Name is 'x', the body's name is None"
    )


def test_malformed_params_are_left_to_the_handler() -> None:
    req = request("tools/call", ["not", "an", "object"])
    assert header_mismatch(post_headers("tools/call"), req) is None
    assert header_mismatch(post_headers("ping"), request("ping")) is None


def test_a_header_mismatch_is_a_bad_request_with_the_spec_code() -> None:
    params = {"name": "mcp__notes__search", "_meta": META}
    status, rid, code, message = refused(
        post_headers("tools/call", "other"), body("tools/call", params)
    )
    assert (status, rid, code) == (400, 1, rpc.HEADER_MISMATCH)
    assert message.startswith("Header mismatch: Mcp-Name is 'other'")


# -- the version --


def test_a_meta_without_the_version_is_invalid_params() -> None:
    status, rid, code, message = refused(post_headers("tools/list"), body("tools/list", {}))
    assert (status, rid, code) == (400, 1, rpc.INVALID_PARAMS)
    assert mcp.KEY_PROTOCOL_VERSION in message


def test_a_meta_without_capabilities_is_invalid_params() -> None:
    params = {"_meta": {mcp.KEY_PROTOCOL_VERSION: VERSION}}
    status, _, code, message = refused(post_headers("tools/list"), body("tools/list", params))
    assert (status, code) == (400, rpc.INVALID_PARAMS)
    assert mcp.KEY_CLIENT_CAPABILITIES in message


def test_a_version_the_header_and_meta_agree_on_but_mcpd_does_not_speak_is_unsupported() -> None:
    params = {"_meta": {**META, mcp.KEY_PROTOCOL_VERSION: "2099-01-01"}}
    with pytest.raises(Reject) as info:
        modern_request(
            post_headers("tools/list"), body("tools/list", params), "2099-01-01", session()
        )
    reply = json.loads(info.value.body)
    assert info.value.status == 400 == MODERN_STATUS[rpc.UNSUPPORTED_PROTOCOL_VERSION]
    assert reply["error"]["code"] == rpc.UNSUPPORTED_PROTOCOL_VERSION
    assert VERSION in reply["error"]["data"]["supported"]


@pytest.mark.parametrize("claimed", ["2099-01-01", 5, None, mcp.LATEST_LEGACY])
def test_a_client_that_disagrees_with_itself_hears_so(claimed: Any) -> None:
    params = {"_meta": {**META, mcp.KEY_PROTOCOL_VERSION: claimed}}
    if claimed is None:
        params = {"_meta": {mcp.KEY_CLIENT_CAPABILITIES: {}}}
    status, rid, code, message = refused(post_headers("tools/list"), body("tools/list", params))
    if claimed is None:  # no version in _meta at all: that is what it hears
        assert (status, code) == (400, rpc.INVALID_PARAMS)
        return
    assert (status, rid, code) == (400, 1, rpc.HEADER_MISMATCH)
    assert (
        message == f"Header mismatch: MCP-Protocol-Version is {VERSION!r}, _meta says {claimed!r}"
    )


def test_only_the_statuses_the_spec_fixes_are_other_than_200() -> None:
    assert MODERN_STATUS[rpc.METHOD_NOT_FOUND] == 404
    assert rpc.INTERNAL_ERROR not in MODERN_STATUS
    assert set(MODERN_STATUS.values()) == {400, 404}
