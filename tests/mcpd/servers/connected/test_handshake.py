"""Opening a session: which era a server is taken to speak from what it answers (or
fails to), what is refused, and what a server may say of itself."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd import __version__
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets, marker
from mcpd.servers.connected.handshake import (
    IDENTITY_CHARS,
    Handshake,
    Incompatible,
    ProtocolViolation,
    ServerInfo,
    client_meta,
    guarded,
    identity,
    relay_capabilities,
)
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.greeting import ServerCapabilities
from tests.support.parts.stand_in import Never
from transports.errors import HttpRPCError, TransportClosed, UnexpectedReply

MODERN = mcp.LATEST_MODERN
LEGACY = mcp.LATEST_LEGACY
VERSION_KEY = f"{mcp.RESERVED_META_PREFIX}protocolVersion"


Outcome = dict[str, Any] | Exception | Never


class ScriptedTransport:
    """What a handshake uses of a transport: each method's answers in turn."""

    def __init__(self, **answers: list[Outcome]) -> None:
        self.answers = {method.replace("_", "/"): list(a) for method, a in answers.items()}
        self.sent: list[tuple[str, Any, Mapping[str, str] | None, bool]] = []
        self.era: str | None = None
        self.resets = 0

    async def request(
        self,
        method: str,
        params: Any,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        self.sent.append((method, params, headers, cancellable))
        answer = self.answers[method].pop(0)
        if isinstance(answer, Never):
            await trio.sleep_forever()
        if isinstance(answer, Exception):
            raise answer
        return Raw(json.dumps(answer).encode())

    def reset_session(self) -> None:
        self.resets += 1

    def methods(self) -> list[str]:
        return [m for m, *_ in self.sent]

    def versions(self) -> list[str]:
        """The version each server/discover asked for."""
        return [p.meta[VERSION_KEY] for m, p, *_ in self.sent if m == "server/discover"]


def handshake(transport: ScriptedTransport, *, http: bool = False, era: str = "auto") -> Handshake:
    return Handshake("srv", transport, http=http, era=era, probe_timeout=2.0)  # type: ignore[arg-type]


DISCOVERED = {
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {"listChanged": True}},
    "instructions": "hi",
}
INITIALIZED = {
    "protocolVersion": LEGACY,
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "old", "version": "1"},
}


def unsupported(*versions: Any) -> rpc.RPCError:
    return rpc.RPCError(
        rpc.UNSUPPORTED_PROTOCOL_VERSION, "unsupported", {"supported": list(versions)}
    )


# -- era detection --


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_greeting_of_megabytes_of_capabilities_keeps_a_few_bytes_of_them(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    pad = {"x": [{}] * 200_000, "tools": {"listChanged": True}, "experimental": {"y": [1] * 9}}
    t = (
        ScriptedTransport(server_discover=[{**DISCOVERED, "capabilities": pad}])
        if era == "modern"
        else ScriptedTransport(initialize=[{**INITIALIZED, "capabilities": pad}])
    )
    with caplog.at_level(logging.INFO):
        greeting = await handshake(t, era="auto" if era == "modern" else "legacy").connect({})
    assert greeting.era == era
    assert greeting.capabilities == ServerCapabilities(tools_changed=True)
    assert len(msgspec.json.encode(greeting)) < 1024
    assert "mcpd keeps only the parts it acts on" in caplog.text


async def test_a_server_answering_discover_is_modern_without_initialize() -> None:
    t = ScriptedTransport(server_discover=[{**DISCOVERED, "ttlMs": 5000}])
    greeting = await handshake(t).connect({})
    assert (greeting.era, greeting.version) == ("modern", MODERN)
    assert greeting.capabilities == ServerCapabilities(tools_changed=True)
    assert greeting.instructions == "hi"
    assert greeting.discover_ttl_ms == 5000
    assert t.methods() == ["server/discover"]
    assert t.era == "modern" and t.resets == 1
    (_, _, headers, cancellable) = t.sent[0]
    assert headers is None and cancellable is False


@pytest.mark.parametrize(
    ("ttl", "kept"), [(-5, 0), (0, 0), (None, 0), (6e4, 60_000), (1e20, 10**20), (10**30, 10**30)]
)
async def test_a_discover_ttl_is_kept_as_the_whole_number_it_is(ttl: Any, kept: int) -> None:
    t = ScriptedTransport(server_discover=[{**DISCOVERED, "ttlMs": ttl}])
    greeting = await handshake(t).connect({})
    assert greeting.era == "modern" and greeting.discover_ttl_ms == kept


@pytest.mark.parametrize("ttl", [1.5, "soon", True, {"ms": 5}])
async def test_a_discover_ttl_that_is_no_whole_number_is_0_and_leaves_the_server_modern(
    ttl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A ttl mcpd cannot use took the server for a legacy one: sent initialize, which a
    modern-only server refuses, so the server was down."""
    t = ScriptedTransport(server_discover=[{**DISCOVERED, "ttlMs": ttl}])
    greeting = await handshake(t).connect({})
    assert greeting.era == "modern" and greeting.discover_ttl_ms == 0
    assert t.methods() == ["server/discover"]
    [said] = [r.getMessage() for r in caplog.records if "ttlMs" in r.getMessage()]
    assert said.startswith("srv: server/discover: its ttlMs ") and said.endswith("taken as 0")


async def test_unsupported_version_is_retried_once_with_a_version_it_lists() -> None:
    t = ScriptedTransport(server_discover=[unsupported("1999-01-01", MODERN), DISCOVERED])
    greeting = await handshake(t).connect({})
    assert greeting.era == "modern"
    assert t.versions() == [MODERN, MODERN]


async def test_unsupported_version_twice_ends_in_the_legacy_handshake() -> None:
    t = ScriptedTransport(
        server_discover=[unsupported(MODERN), unsupported(MODERN)], initialize=[INITIALIZED]
    )
    greeting = await handshake(t).connect({})
    assert greeting.era == "legacy"
    assert t.methods() == ["server/discover", "server/discover", "initialize"]


@pytest.mark.parametrize("data", [None, "x", {"supported": "2026-07-28"}, {"supported": [5]}])
async def test_unsupported_version_without_a_usable_list_is_legacy(data: Any) -> None:
    error = rpc.RPCError(rpc.UNSUPPORTED_PROTOCOL_VERSION, "unsupported", data)
    t = ScriptedTransport(server_discover=[error], initialize=[INITIALIZED])
    greeting = await handshake(t).connect({})
    assert greeting.era == "legacy"
    assert t.methods() == ["server/discover", "initialize"]


@pytest.mark.parametrize(
    "answer",
    [
        {"supportedVersions": ["2099-01-01"]},
        {"supportedVersions": "2026-07-28"},
        [1, 2],
        rpc.RPCError(rpc.METHOD_NOT_FOUND, "Method not found"),
        UnexpectedReply("an HTML page", status=400),
    ],
)
async def test_anything_but_a_modern_discover_answer_gets_initialize(answer: Any) -> None:
    t = ScriptedTransport(server_discover=[answer], initialize=[INITIALIZED])
    greeting = await handshake(t).connect({"sampling": {}})
    assert (greeting.era, greeting.version) == ("legacy", LEGACY)
    assert greeting.server_info == ServerInfo(name="old", version="1")
    assert t.era == "legacy"
    (_, params, _, cancellable) = t.sent[-1]
    assert params["protocolVersion"] == LEGACY and params["capabilities"] == {"sampling": {}}
    assert cancellable is False


async def test_a_legacy_preference_sends_no_probe() -> None:
    t = ScriptedTransport(initialize=[INITIALIZED])
    greeting = await handshake(t, era="legacy").connect({})
    assert greeting.era == "legacy" and t.methods() == ["initialize"]


async def test_a_modern_preference_refuses_a_legacy_server() -> None:
    t = ScriptedTransport(server_discover=[rpc.RPCError(rpc.METHOD_NOT_FOUND, "no")])
    with pytest.raises(Incompatible, match="srv: does not speak protocol"):
        await handshake(t, era="modern").connect({})
    assert t.methods() == ["server/discover"]


async def test_a_modern_preference_says_a_silent_server_was_silent_not_of_another_era(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = ScriptedTransport(server_discover=[Never()])
    with pytest.raises(Incompatible) as raised:
        await handshake(t, era="modern").connect({})
    said = str(raised.value)
    assert "no answer to server/discover within" in said and "probe_timeout" in said
    assert "does not speak" not in said
    assert t.methods() == ["server/discover"]


async def test_a_silent_probe_falls_back_and_a_refused_initialize_says_the_probe_was_silent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = ScriptedTransport(
        server_discover=[Never()], initialize=[rpc.RPCError(-32600, "session not initialized")]
    )
    with pytest.raises(Incompatible) as caught:
        await handshake(t).connect({})
    assert str(caught.value) == (
        "srv: no answer to server/discover within 2 s (the daemon's probe_timeout), "
        'and initialize failed with the error "session not initialized"'
    )


async def test_a_stdio_server_that_dies_at_the_probe_is_marked_for_legacy_next_time() -> None:
    t = ScriptedTransport(server_discover=[TransportClosed("exited")])
    h = handshake(t)
    with pytest.raises(TransportClosed):
        await h.connect({})
    assert h.probe_died
    h = handshake(ScriptedTransport(server_discover=[TransportClosed("gone")]), http=True)
    with pytest.raises(TransportClosed):
        await h.connect({})
    assert not h.probe_died


async def test_an_http_server_with_modern_errors_at_discover_is_a_protocol_violation() -> None:
    refused = HttpRPCError(rpc.METHOD_NOT_FOUND, "no such method", http_status=404)
    t = ScriptedTransport(server_discover=[refused])
    said = 'srv: server/discover failed with the error "no such method"'
    with pytest.raises(ProtocolViolation, match=said):
        await handshake(t, http=True).connect({})
    (_, _, headers, _) = t.sent[0]
    assert headers is not None and MODERN in headers.values()
    # The same error over stdio, or at another status, is a legacy server's.
    for http, status in ((False, 404), (True, 200)):
        refused = HttpRPCError(rpc.METHOD_NOT_FOUND, "no such method", http_status=status)
        t = ScriptedTransport(server_discover=[refused], initialize=[INITIALIZED])
        assert (await handshake(t, http=http).connect({})).era == "legacy"


async def test_a_slow_modern_server_met_with_initialize_is_probed_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = ScriptedTransport(
        server_discover=[Never(), DISCOVERED], initialize=[unsupported(LEGACY, MODERN)]
    )
    greeting = await handshake(t).connect({})
    assert greeting.era == "modern"
    assert t.methods() == ["server/discover", "initialize", "server/discover"]


# -- initialize's answer --


@pytest.mark.parametrize(
    "answer",
    [
        {"capabilities": {}},
        {"protocolVersion": 2025},
        {"protocolVersion": LEGACY, "capabilities": []},
        "initialized",
    ],
)
async def test_a_malformed_initialize_result_is_a_protocol_violation(answer: Any) -> None:
    t = ScriptedTransport(initialize=[answer])
    with pytest.raises(ProtocolViolation, match="srv: bad initialize result"):
        await handshake(t, era="legacy").connect({})


@pytest.mark.parametrize("version", [MODERN, "1.0", ""])
async def test_initialize_offering_a_version_mcpd_does_not_speak_is_incompatible(
    version: str,
) -> None:
    t = ScriptedTransport(initialize=[{"protocolVersion": version}])
    with pytest.raises(Incompatible, match=re.escape(f'offered protocol "{version}"')):
        await handshake(t, era="legacy").connect({})


async def test_every_legacy_version_is_accepted_as_offered() -> None:
    for version in mcp.LEGACY_VERSIONS:
        t = ScriptedTransport(initialize=[{"protocolVersion": version, "instructions": None}])
        greeting = await handshake(t, era="legacy").connect({})
        assert greeting.version == version and greeting.instructions is None


# -- what a server says of itself --


def test_identity_keeps_only_strings_and_none_when_there_are_none() -> None:
    assert identity({"name": "n", "version": 3, "title": ["t"], "other": "x"}) == ServerInfo(
        name="n"
    )
    assert identity({"version": None}) is None
    assert identity("server") is None
    assert identity(None) is None
    info = mcp.Implementation(name="n", version="1", title="T")
    assert identity(info) == ServerInfo(name="n", version="1", title="T")
    assert identity(mcp.Implementation(name="n", version="1")) == ServerInfo(name="n", version="1")


def test_identity_is_one_clean_short_line() -> None:
    said = identity({"name": "evil\x1b[2J\nname\t\u202eeman", "title": "t" * 10**6})
    assert said is not None
    assert said.name == "evil name eman"
    assert said.title is not None and len(said.title) == IDENTITY_CHARS
    assert said.title.endswith("...")


def test_a_secret_in_a_server_name_is_masked_and_the_rest_kept() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.srv.env.TOKEN", "s3cret-value-123")])
    guard = SecretGuard(known)
    info = ServerInfo(name="leaks s3cret-value-123", version="1")
    shown = guarded(info, guard, "srv")
    assert shown == ServerInfo(name=f"leaks {marker('servers.srv.env.TOKEN')}", version="1")
    plain = ServerInfo(name="plain")
    assert guarded(plain, guard, "srv") is plain
    assert guarded(None, guard, "srv") is None


def test_request_meta_keeps_an_agents_keys_but_never_its_reserved_ones() -> None:
    meta = client_meta(
        MODERN,
        {"elicitation": {}},
        {VERSION_KEY: "1999-01-01", f"{mcp.RESERVED_META_PREFIX}x": 1, "trace": "abc"},
    )
    assert meta[VERSION_KEY] == MODERN
    assert meta["trace"] == "abc"
    assert f"{mcp.RESERVED_META_PREFIX}x" not in meta
    encoded = json.loads(msgspec.json.encode(meta))
    assert encoded[f"{mcp.RESERVED_META_PREFIX}clientInfo"] == {
        "name": "mcpd",
        "version": __version__,
    }


def test_the_capabilities_declared_are_those_configured() -> None:
    assert relay_capabilities([]) == {}
    assert relay_capabilities(["roots"]) == {"roots": {"listChanged": False}}
    caps = relay_capabilities(["elicitation", "sampling", "roots"])
    assert set(caps) == {"elicitation", "sampling", "roots"}
    assert features.declares(caps, "elicitation/create", {"mode": "url"})
    for method in features.ASK_METHODS:
        assert features.declares(caps, method)


MALFORMED = {"supportedVersions": [MODERN], "capabilities": [1, 2], "cacheScope": "weird"}


async def test_a_malformed_discover_answer_is_said_naming_what_is_wrong_and_initialize_says_it_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = ScriptedTransport(server_discover=[MALFORMED], initialize=[rpc.RPCError(-32601, "nf")])
    with caplog.at_level(logging.INFO, logger="mcpd.server"), pytest.raises(Incompatible) as caught:
        await handshake(t).connect({})
    said = str(caught.value)
    assert said.startswith("srv: its server/discover answer was malformed (")
    assert "$.capabilities" in said and said.endswith('initialize failed with the error "nf"')
    [warned] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "server/discover answer was malformed" in warned.getMessage()
    assert "$.capabilities" in warned.getMessage()


async def test_a_modern_preference_says_a_malformed_discover_answer_was_malformed() -> None:
    t = ScriptedTransport(server_discover=[MALFORMED])
    with pytest.raises(Incompatible) as caught:
        await handshake(t, era="modern").connect({})
    said = str(caught.value)
    assert "server/discover answer was malformed" in said and "$.capabilities" in said
    assert "does not speak" not in said
