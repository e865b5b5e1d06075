"""What a spliced tools/call's ``_meta`` stands for (``spliced_context``,
``agents_own``): the context it gives the call, the agent's own keys passed on to the
server, which contexts a connection keeps, and a ``_meta`` that is no object refused
as the general decoder words it."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from msgspec import UNSET, Raw

from mcpd.agents.agent import Agent
from mcpd.agents.calls.request_context import agents_own, spliced_context
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

MODERN = {
    "io.modelcontextprotocol/protocolVersion": mcp.LATEST_MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Connection:
    """The parts of an agent's connection a call's ``_meta`` is read against."""

    def __init__(self) -> None:
        self.session = AgentSession(mcp.Implementation(name="mcpd", version="0"), {})
        self.contexts: dict[bytes, RequestContext] = {}


def agent() -> tuple[Agent, Connection]:
    conn = Connection()
    return cast(Agent, conn), conn


def raw(meta: Any) -> Raw:
    return Raw(json.dumps(meta).encode())


def test_a_modern_meta_gives_its_era_and_is_kept_when_it_has_no_own_keys() -> None:
    as_agent, conn = agent()
    meta = raw(MODERN)
    ctx, own = spliced_context(as_agent, meta)
    assert (ctx.era, ctx.version, own) == ("modern", mcp.LATEST_MODERN, None)
    assert conn.contexts == {bytes(meta): ctx}


def test_the_agents_own_keys_are_passed_on_and_such_a_meta_is_not_kept() -> None:
    as_agent, conn = agent()
    meta = {**MODERN, "progressToken": 5, "vendor/trace": "t1"}
    ctx, own = spliced_context(as_agent, raw(meta))
    assert own == {"progressToken": 5, "vendor/trace": "t1"}
    assert ctx.progress_token == 5
    assert conn.contexts == {}


def test_a_connection_keeps_a_few_small_contexts_only() -> None:
    as_agent, conn = agent()
    for n in range(12):
        spliced_context(as_agent, raw({**MODERN, "io.modelcontextprotocol/n": n}))
    assert len(conn.contexts) == 8
    huge = raw({**MODERN, "io.modelcontextprotocol/pad": "x" * 9000})
    _, conn2 = agent()
    spliced_context(cast(Agent, conn2), huge)
    assert conn2.contexts == {}


def test_no_meta_before_initialize_is_refused_as_the_session_refuses_it() -> None:
    as_agent, _ = agent()
    with pytest.raises(rpc.RPCError) as info:
        spliced_context(as_agent, UNSET)
    assert info.value.code == rpc.INVALID_PARAMS


@pytest.mark.parametrize("meta", [b"[1]", b'"text"', b"5", b"null"])
def test_a_meta_that_is_no_object_is_refused_as_invalid_params(meta: bytes) -> None:
    as_agent, conn = agent()
    with pytest.raises(rpc.InvalidParams) as info:
        spliced_context(as_agent, Raw(meta))
    assert "_meta" in str(info.value)
    assert conn.contexts == {}


def test_an_unsupported_version_is_refused_and_nothing_kept() -> None:
    as_agent, conn = agent()
    meta = {**MODERN, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    with pytest.raises(rpc.RPCError) as info:
        spliced_context(as_agent, raw(meta))
    assert info.value.code == rpc.UNSUPPORTED_PROTOCOL_VERSION
    assert conn.contexts == {}


@pytest.mark.parametrize(
    ("meta", "own"),
    [
        (None, None),
        ({}, None),
        (MODERN, None),
        ({**MODERN, "a": 1}, {"a": 1}),
        ({"io.modelcontextprotocol.x": 1}, {"io.modelcontextprotocol.x": 1}),
    ],
)
def test_the_agents_own_keys_are_those_outside_the_reserved_prefix(
    meta: dict[str, Any] | None, own: dict[str, Any] | None
) -> None:
    assert agents_own(meta) == own
