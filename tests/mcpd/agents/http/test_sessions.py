"""A legacy MCP session over HTTP as mcpd keeps it (``LegacySession``, ``OpenedBy``,
``holder_of``): where and by whom it was opened, what ending it does to its requests,
its stream and what servers wait to ask it, and what a request cut short is told."""

from __future__ import annotations

import json
from typing import Any, cast

import trio
from msgspec import UNSET

from mcpd.agents.entry.identity import AgentIdentity, Holder
from mcpd.agents.entry.peers import Peer
from mcpd.agents.http.exchange import RequestSender
from mcpd.agents.http.sessions import (
    DELETED,
    PUSHED_OUT,
    LegacySession,
    OpenedBy,
    holder_of,
)
from mcpd.agents.profiles import Profile
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.calling.calls import Call
from mcpd.servers.supervisor import Supervisor
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

PEER = Peer(pid=40, uid=1000, gid=1000)


def servers() -> Profile:
    catalog = Catalog(NamingConfig(), ListGate())
    config = parse_config({"servers": {"notes": {"command": "x"}}}, env={})
    base = AllServers(Supervisor(config, catalog), catalog)
    return Profile(base.view_of("default"))


def session() -> LegacySession:
    server = AgentSession(mcp.Implementation(name="mcpd", version="0"), {})
    opened = OpenedBy(endpoint=False, fixed=None, uid=1000, server=None, unverified=False)
    return LegacySession(server, servers(), AgentIdentity(PEER), opened)


def call(state: str) -> Call:
    ctx = RequestContext("legacy", "2025-11-25", {}, {})
    made = Call(7, "search", UNSET, cast(Any, None), ctx)
    made.state = state
    return made


def error(reply: bytes | None) -> tuple[Any, str]:
    assert reply is not None
    msg = json.loads(reply)
    assert msg["error"]["code"] == -32000
    return msg["id"], msg["error"]["message"]


def test_who_opened_it_on_a_socket() -> None:
    opened = OpenedBy.of(RequestSender(peer=PEER, fixed="work"))
    assert opened == OpenedBy(endpoint=False, fixed="work", uid=1000, server=None, unverified=False)


def test_a_servers_process_or_an_unverified_peer_is_told_apart() -> None:
    of_server = Peer(pid=41, uid=1000, gid=1000, server="notes")
    assert OpenedBy.of(RequestSender(peer=of_server)).server == "notes"
    unverified = Peer(pid=42, uid=1000, gid=1000, unverified=True)
    assert OpenedBy.of(RequestSender(peer=unverified)).unverified


def test_whose_a_session_is_its_peers_or_its_connections_holders() -> None:
    assert holder_of(AgentIdentity(PEER)) == 1000
    assert holder_of(AgentIdentity(None, Holder(uid=1001, pid=9))) == 1001
    # A client on another machine: all its users hold the one token.
    assert holder_of(AgentIdentity(None)) is None


async def test_nothing_is_cut_short_while_the_session_lives() -> None:
    legacy = session()
    assert legacy.ended is None
    assert legacy.cut_short(3, None) is None
    assert legacy.cut_short(7, call("sent")) is None


async def test_ending_it_cancels_its_requests_and_closes_its_stream() -> None:
    legacy = session()
    first, second = trio.CancelScope(), trio.CancelScope()
    legacy.requests.update({1: first, "b": second})
    legacy.close(DELETED)
    assert legacy.ended == DELETED
    assert first.cancel_called and second.cancel_called
    assert legacy.news.closed
    assert legacy.asks.gone == DELETED


async def test_a_request_cut_short_is_told_why_and_whether_its_call_ran() -> None:
    legacy = session()
    legacy.close(PUSHED_OUT)
    assert error(legacy.cut_short("r", None)) == (
        "r",
        f"{PUSHED_OUT}: this request was ended before it was answered",
    )
    assert error(legacy.cut_short(7, call("new"))) == (
        7,
        f"{PUSHED_OUT}: this call was not sent to its tool server, so it did not run",
    )
    assert error(legacy.cut_short(7, call("sent"))) == (
        7,
        f"{PUSHED_OUT}: this call was ended before its tool server answered; it may have "
        "reached the server, so whether it ran is not known",
    )
