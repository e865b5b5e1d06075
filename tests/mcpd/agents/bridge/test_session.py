"""The host's legacy session as ``mcpd bridge`` keeps it (``HostSession``) and sets it
up again on a new daemon connection: the lines it repeats, under ids of its own, and
the list changes it tells the host of from the daemon's answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import Raw

from mcpd.agents.bridge.ledger import OpenRelays, OwnRequests
from mcpd.agents.bridge.session import HostSession, list_changes
from protocol.jsonrpc import messages as rpc

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h"}}


def req(method: str, params: Any = None, rid: rpc.Id = 1) -> rpc.Request:
    return rpc.Request(rid, method, None if params is None else Raw(json.dumps(params).encode()))


def replayed(session: HostSession, host: OpenRelays | None = None) -> list[dict[str, Any]]:
    lines = session.replay(OwnRequests(), host or OpenRelays())
    assert lines == b"" or lines.endswith(b"\n")
    return [json.loads(line) for line in lines.splitlines()]


def test_nothing_is_repeated_before_the_host_initialized() -> None:
    session = HostSession()
    session.note(req("resources/subscribe", {"uri": "file:///a"}))
    session.note(req("logging/setLevel", {"level": "debug"}))
    assert session.replay(OwnRequests(), OpenRelays()) == b""


def test_the_session_is_repeated_in_order_under_the_bridges_own_ids() -> None:
    session = HostSession()
    session.note(req("initialize", INIT, rid=1))
    session.note(req("resources/subscribe", {"uri": "file:///a"}, rid=2))
    session.note(req("logging/setLevel", {"level": "debug"}, rid=3))
    session.note(req("resources/subscribe", {"uri": "file:///b", "x": 1}, rid=4))
    host = OpenRelays()
    host.add(object(), ["mcpd-bridge-2"], "tools/call")
    lines = replayed(session, host)
    assert [(m.get("id"), m["method"], m.get("params")) for m in lines] == [
        ("mcpd-bridge-1", "initialize", INIT),
        (None, "notifications/initialized", None),
        ("mcpd-bridge-3", "logging/setLevel", {"level": "debug"}),
        ("mcpd-bridge-4", "resources/subscribe", {"uri": "file:///a"}),
        ("mcpd-bridge-5", "resources/subscribe", {"uri": "file:///b", "x": 1}),
    ]


def test_an_unsubscribe_drops_the_subscription_and_a_repeat_keeps_one() -> None:
    session = HostSession()
    session.note(req("initialize", INIT))
    for uri in ("file:///a", "file:///b", "file:///a"):
        session.note(req("resources/subscribe", {"uri": uri}))
    session.note(req("resources/unsubscribe", {"uri": "file:///b"}))
    session.note(req("resources/unsubscribe", {"uri": "file:///never"}))
    subscribed = [m["params"]["uri"] for m in replayed(session) if m["method"].startswith("res")]
    assert subscribed == ["file:///a"]


def test_the_last_log_level_is_the_one_repeated() -> None:
    session = HostSession()
    session.note(req("initialize", INIT))
    session.note(req("logging/setLevel", {"level": "debug"}))
    session.note(req("logging/setLevel", {"level": "error"}))
    levels = [m["params"] for m in replayed(session) if m["method"] == "logging/setLevel"]
    assert levels == [{"level": "error"}]


def test_a_new_initialize_starts_the_session_afresh() -> None:
    session = HostSession()
    session.note(req("initialize", INIT))
    session.note(req("resources/subscribe", {"uri": "file:///a"}))
    session.note(req("logging/setLevel", {"level": "debug"}))
    again = {**INIT, "clientInfo": {"name": "h2"}}
    session.note(req("initialize", again))
    lines = replayed(session)
    assert [m["method"] for m in lines] == ["initialize", "notifications/initialized"]
    assert lines[0]["params"] == again


@pytest.mark.parametrize("params", [None, {}, {"uri": 5}, [1]])
def test_a_subscription_without_a_uri_is_not_kept(params: Any) -> None:
    session = HostSession()
    session.note(req("initialize", INIT))
    session.note(req("resources/subscribe", params))
    session.note(req("resources/unsubscribe", params))
    assert [m["method"] for m in replayed(session)] == ["initialize", "notifications/initialized"]


def test_other_requests_change_nothing_of_the_session() -> None:
    session = HostSession()
    session.note(req("tools/call", {"name": "x"}))
    session.note(req("initialize", INIT))
    session.note(req("tools/list"))
    assert len(replayed(session)) == 2


def answer(capabilities: Any) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": "b", "result": {"capabilities": capabilities}}
    ).encode()


def test_the_host_hears_of_each_list_the_daemon_announces_changes_of() -> None:
    said: list[str] = []
    caps = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": False},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
    }
    lines = list_changes(answer(caps), said.append)
    assert [json.loads(line) for line in lines.splitlines()] == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"},
    ]
    assert said == [
        "connected to mcpd again and set the host's session up anew; "
        "told the host its tools, resources may have changed"
    ]


def test_a_daemon_announcing_nothing_tells_the_host_nothing() -> None:
    said: list[str] = []
    assert list_changes(answer({}), said.append) == b""
    assert said == ["connected to mcpd again and set the host's session up anew"]


@pytest.mark.parametrize(
    "reply",
    [
        b'{"jsonrpc":"2.0","id":"b","error":{"code":-32600,"message":"no"}}',
        b"not json",
        answer({"tools": {"listChanged": "yes"}}),
        answer([]),
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["an-error", "not-json", "flag-not-a-boolean", "not-an-object", "nested-deep"],
)
def test_an_answer_that_did_not_take_the_session_is_said_and_tells_the_host_nothing(
    reply: bytes,
) -> None:
    said: list[str] = []
    assert list_changes(reply, said.append) == b""
    assert said == ["mcpd did not take the host's session again; its requests get mcpd's errors"]
