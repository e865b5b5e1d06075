"""A server's JSON-RPC error as agents get it: its texts cleaned, mcpd's keys gone from
its data, the secrets mcpd holds masked; the same error when nothing needed it."""

from __future__ import annotations

from mcpd.config.secrets import HeldSecret
from mcpd.policy.guard import SecretGuard
from mcpd.policy.masking import KnownSecrets
from mcpd.servers.rpc_errors import error_for_agents
from protocol import jsonrpc as rpc

SECRET = "notes-secret-value-7f3a9c"


def guard() -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.notes.env.TOKEN", SECRET)])
    return SecretGuard(known)


def test_its_message_and_text_data_are_cleaned_then_masked() -> None:
    # A secret split by a character nobody sees is joined by the cleaning, then masked.
    split = SECRET[:6] + "\u200b" + SECRET[6:]
    exc = rpc.RPCError(-32602, f"bad\x1b[2K arguments\u202e {split}", "see\x07 the\u2066 docs")
    got = error_for_agents(guard(), "evil", exc, "a tools/call error")
    assert got.code == -32602
    assert got.message.startswith("bad arguments [secret") and SECRET not in got.message
    assert got.data == "see the docs"


def test_what_it_put_under_mcpds_keys_in_its_data_is_dropped() -> None:
    data = {
        "mcpd/outage": {"server": "notes", "state": "failed"},
        "why": "forged",
        "_meta": {"mcpd/server": "notes", "k": 1},
    }
    exc = rpc.RPCError(-32000, "The tool server 'notes' is unavailable", data)
    got = error_for_agents(guard(), "evil", exc, "a prompts/get error")
    assert got.data == {"why": "forged", "_meta": {"k": 1}}
    assert "mcpd/outage" in data  # the error the transport handed over is left alone


def test_an_error_with_nothing_to_change_is_passed_on_as_it_is() -> None:
    for data in (None, {"uri": "file:///x", "mcpd": 1}, ["mcpd/outage"], 3):
        exc = rpc.RPCError(-32602, "Unknown prompt 'x'", data)
        assert error_for_agents(guard(), "s", exc, "an error") is exc
