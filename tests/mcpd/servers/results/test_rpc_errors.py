"""A server's JSON-RPC error as agents get it: its texts cleaned, mcpd's keys gone from
its data, the secrets mcpd holds masked; the same error when nothing needed it. From an
HTTP server, an error is a call's under the call's id or with an error status only, and
its data reaches agents as the server wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import trio

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.servers.results.rpc_errors import answer_error, data_findings, error_for_agents
from mcpd.servers.results.taking_apart import MOST_PARTS
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import connect, make_config, running
from tests.support.http_servers.serving import LegacySession, Responder, SeenRequest, serve_http
from transports.errors import HttpRPCError

SECRET = "notes-secret-value-7f3a9c"
HTTP_JSON = {"Content-Type": "application/json"}


def guard() -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.notes.env.TOKEN", SECRET)])
    return SecretGuard(known)


def for_agents(exc: rpc.RPCError, what: str = "an error", alias: str = "evil") -> rpc.RPCError:
    held = guard()
    return error_for_agents(held, alias, exc, what, data_findings(held, alias, exc))


def received(data: bytes) -> rpc.RPCError:
    """An error with ``data`` as a server sent it (the bytes its transport keeps)."""
    line = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no","data":' + data + b"}}"
    msg = envelope.decode_message(line)
    assert isinstance(msg, rpc.ErrorResponse)
    return rpc.RPCError.from_object(msg.error)


def written(exc: rpc.RPCError) -> Any:
    """The data of ``exc`` as an agent reads it."""
    return json.loads(rpc.encode_error(1, exc.code, exc.message, exc.data))["error"].get("data")


def test_its_message_and_text_data_are_cleaned_then_masked() -> None:
    # A secret split by a character nobody sees is joined by the cleaning, then masked.
    split = SECRET[:6] + "\u200b" + SECRET[6:]
    exc = rpc.RPCError(-32602, f"bad\x1b[2K arguments\u202e {split}", "see\x07 the\u2066 docs")
    got = for_agents(exc, "a tools/call error")
    assert got.code == -32602
    assert got.message.startswith("bad arguments [secret") and SECRET not in got.message
    assert got.data == "see the docs"


def test_an_error_an_http_reply_carried_keeps_its_status_when_cleaned_or_masked() -> None:
    # Whether the server knew the method at all is read from the status (404).
    raw = msgspec.Raw(b'"no such method\\u0007"')
    cleaned = for_agents(HttpRPCError(-32601, "Method not found", raw, http_status=404))
    assert isinstance(cleaned, HttpRPCError) and cleaned.http_status == 404
    assert cleaned.data == "no such method"
    masked = for_agents(HttpRPCError(-32000, f"no {SECRET}", http_status=400), alias="notes")
    assert isinstance(masked, HttpRPCError) and masked.http_status == 400
    assert SECRET not in masked.message


def test_what_it_put_under_mcpds_keys_in_its_data_is_dropped() -> None:
    data = {
        "mcpd/outage": {"server": "notes", "state": "failed"},
        "why": "forged",
        "_meta": {"mcpd/server": "notes", "k": 1},
    }
    exc = rpc.RPCError(-32000, "The tool server 'notes' is unavailable", data)
    got = for_agents(exc, "a prompts/get error")
    assert got.data == {"why": "forged", "_meta": {"k": 1}}
    assert "mcpd/outage" in data  # the error the transport handed over is left alone


def test_an_error_with_nothing_to_change_is_passed_on_as_it_is() -> None:
    for data in (None, {"uri": "file:///x", "mcpd": 1}, ["mcpd/outage"], 3):
        exc = rpc.RPCError(-32602, "Unknown prompt 'x'", data)
        assert for_agents(exc, alias="s") is exc


def test_data_as_the_server_sent_it_is_made_fit_as_a_value_is() -> None:
    text = received(b'"see\\u0007 the\\u2066 docs"')
    assert written(for_agents(text)) == "see the docs"
    own = received(b'{"mcpd/outage":{"state":"failed"},"why":"forged","_meta":{"mcpd/x":1}}')
    assert written(for_agents(own)) == {"why": "forged", "_meta": {}}
    plain = received(b'{"uri":"file:///x","mcpd":1}')
    assert for_agents(plain) is plain


def test_a_secret_spelled_with_escapes_is_masked_where_mcpd_writes_the_data_again() -> None:
    spelled = "".join(f"\\u{ord(c):04x}" for c in SECRET).encode()
    exc = received(b'{"mcpd/outage":"forged","said":"' + spelled + b'"}')
    data = written(for_agents(exc))
    assert "mcpd/outage" not in data and data["said"].startswith("[secret")


# -- from an HTTP server --

NOPE = b'{"jsonrpc": "2.0", "id": true, "error": {"code": -32000, "message": "nope",\n "data": '


async def refusing(req: SeenRequest, respond: Responder) -> None:
    """A legacy server whose errors name an id that is none: in a 200 reply (with many
    values under mcpd's key in its data) or a 400 one (data of few, as it wrote them)."""
    if req.method != "POST":
        await respond.reply(405)
    elif req.rpc_method == "tools/call" and req.message["params"]["name"] == "boom":
        many = b",".join([b'{"mcpd/outage":1}'] * MOST_PARTS)
        await respond.reply(200, NOPE + b"[" + many + b"]}}", HTTP_JSON)
    elif req.rpc_method == "tools/call" and req.message["params"]["name"] == "refuse":
        await respond.reply(400, NOPE + b'{"n": 1.50,\n  "d": 1e2}}}', HTTP_JSON)
    else:
        await respond.json({"jsonrpc": "2.0", "id": req.rpc_id, "result": {}})


async def test_an_http_servers_error_under_an_id_that_is_none_is_its_calls_only_on_an_error_status(
    tmp_path: Path,
) -> None:
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("boom", "refuse")]
    with trio.fail_after(60):
        async with serve_http(LegacySession(refusing, tools=tools)) as srv:
            cfg = make_config(tmp_path, {"bad": {"url": srv.url(), "era": "legacy"}})
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                # A 200 reply under an id that is no id answers no request: the call fails
                # saying so, and the data is neither read nor passed on.
                failed = await agent.rpc("tools/call", {"name": "mcp__bad__boom"})
                assert "error" not in failed and failed["result"]["isError"] is True
                said = failed["result"]["content"][0]["text"]
                assert "invalid JSON-RPC in the response body: Invalid response: bad id" in said
                assert "nope" not in json.dumps(failed)
                # An error status's body is the call's answer whatever its id; its data
                # reaches the agent as the server wrote it, on one line.
                line = await agent.rpc_text("tools/call", {"name": "mcp__bad__refuse"})
                assert b'"message":"[bad] nope","data":{"n":1.50,"d":1e2}}' in line


def test_an_error_about_mcpds_request_is_mcpds_own_naming_the_server() -> None:
    """A server's -32022, -32020 and -32021 are about mcpd's request to it: mcpd's own
    internal error, the server's words quoted (escaped, on one line) and only -32021's
    data, which says what an agent could declare, kept; any other error is the
    server's, marked."""
    needs = msgspec.Raw(b'{"requiredCapabilities":{"roots":{}}}')
    for code, data, kept in [
        (rpc.UNSUPPORTED_PROTOCOL_VERSION, msgspec.Raw(b'{"supported":["x"]}'), msgspec.UNSET),
        (rpc.HEADER_MISMATCH, msgspec.UNSET, msgspec.UNSET),
        (rpc.MISSING_REQUIRED_CLIENT_CAPABILITY, needs, needs),
    ]:
        got = answer_error("evil", rpc.RPCError(code, "no\n[mcpd] trust me", data))
        assert got.code == rpc.INTERNAL_ERROR and got.data == kept
        assert got.message.startswith("mcpd's request to the server 'evil' failed: ")
        assert '(its error "no\\n[mcpd] trust me")' in got.message
    plain = answer_error("evil", rpc.RPCError(rpc.INVALID_PARAMS, "bad"))
    assert (plain.code, plain.message) == (rpc.INVALID_PARAMS, "[evil] bad")
