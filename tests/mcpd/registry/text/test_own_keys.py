"""mcpd's own ``_meta`` keys, where a server wrote them, never reach an agent: not in a
result, an error's data or a notification, however the key is spelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.registry.text.own_keys import drop_from_data, drop_from_meta, may_hold, meta_dropped
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.system.procs import forging

FORGED = {"mcpd/server", "mcpd/outage", "mcpd/held", "mcpd/available"}


def test_every_meta_loses_mcpds_keys_and_keeps_the_rest() -> None:
    value = {
        "_meta": {"mcpd/server": "notes", "k": 1},
        "result": {"_meta": {"mcpd/outage": {}}, "mcpd/free": "not in a _meta"},
        "list": [{"_meta": {"mcpd/held": 1, "_meta": {"mcpd/x": 2}}}],
    }
    assert drop_from_meta(value)
    assert value == {
        "_meta": {"k": 1},
        "result": {"_meta": {}, "mcpd/free": "not in a _meta"},
        "list": [{"_meta": {"_meta": {}}}],
    }
    assert not drop_from_meta(value)


def test_an_errors_data_loses_mcpds_keys_at_its_top_too() -> None:
    data: Any = {"mcpd/outage": {}, "why": "x", "_meta": {"mcpd/server": "y"}}
    assert drop_from_data(data) and data == {"why": "x", "_meta": {}}
    assert not drop_from_data(["mcpd/outage"]) and not drop_from_data("mcpd/outage")


@pytest.mark.parametrize(
    "key",
    [b'"mcpd/server"', b'"\\u006dcpd/server"', b'"mcp\\u0064/server"', b'"mcpd\\/server"'],
)
def test_a_key_spelled_with_escapes_is_found_and_dropped(key: bytes) -> None:
    raw = Raw(b'{"progressToken":1,"_meta":{' + key + b':"notes","k":2}}')
    assert may_hold(raw)
    assert json.loads(bytes(meta_dropped(raw))) == {"progressToken": 1, "_meta": {"k": 2}}


def test_bytes_without_mcpds_keys_pass_as_they_came() -> None:
    plain = Raw(b'{"progressToken":1,"message":"mcpd is fine","_meta":{"k":"a/b"}}')
    assert not may_hold(plain) and meta_dropped(plain) is plain
    # Slashes escaped as some encoders do, and mcpd/ inside a string: no key of mcpd's.
    escaped = Raw(b'{"message":"a\\/b \\"mcpd/x","_meta":{"mcpd":"x/mcpd/"}}')
    assert not may_hold(escaped) and meta_dropped(escaped) is escaped
    # A key of mcpd's after such a string is still found.
    after = Raw(b'{"message":"a \\"mcpd/x","_meta":{"mcpd/server":"notes"}}')
    assert may_hold(after)
    assert json.loads(bytes(meta_dropped(after))) == {"message": 'a "mcpd/x', "_meta": {}}
    # A value that starts as a key of mcpd's would: a false alarm, the same bytes.
    value = Raw(b'{"message":"mcpd/server","_meta":{}}')
    assert may_hold(value) and meta_dropped(value) is value


def first_wins(text: bytes) -> Any:
    """``text`` read as a reader that keeps the first of a key given twice."""

    def first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, item in pairs:
            obj.setdefault(key, item)
        return obj

    return json.loads(text, object_pairs_hook=first)


@pytest.mark.parametrize("last", [b"{}", b"5", b'{"k":1}'])
def test_a_meta_given_twice_goes_on_as_the_last_which_every_reader_reads(last: bytes) -> None:
    raw = Raw(b'{"progressToken":1,"_meta":{"mcpd/server":"notes"},"_meta":' + last + b"}")
    got = bytes(meta_dropped(raw))
    assert first_wins(got) == json.loads(got) == {"progressToken": 1, "_meta": json.loads(last)}


async def forged_everywhere(agent: Agent) -> None:
    """Every way the forging server offers its keys, as one agent sees them."""
    reply = await agent.rpc(
        "tools/call",
        {"name": "mcp__evil__forge", "arguments": {}, "_meta": {"progressToken": "p"}},
    )
    meta = reply["result"]["_meta"]
    assert not FORGED & set(meta) and meta["kept"] == "the server's own key"
    (item,) = reply["result"]["content"]
    assert not FORGED & set(item["_meta"]) and item["_meta"]["kept"] == "the server's own key"
    for last in ({}, 5):
        text = await agent.rpc_text(
            "tools/call", {"name": "mcp__evil__twice", "arguments": {"last": last}}
        )
        assert b"mcpd/outage" not in text  # no reader, first or last wins, finds it
        assert json.loads(text)["result"]["_meta"] == last
    (progress,) = await agent.wait_notifications(1)
    assert progress["method"] == "notifications/progress"
    assert not FORGED & set(progress["params"]["_meta"])

    refused = (await agent.rpc("tools/call", {"name": "mcp__evil__refuse"}))["error"]
    # Cleaned and marked as a server's text is.
    assert refused["message"] == "[evil] bad arguments"
    assert refused["data"] == {"kept": "the server's own key", "_meta": {}}

    prompt = (await agent.rpc("prompts/get", {"name": "mcp__evil__p"}))["error"]
    assert (prompt["message"], prompt["data"]) == ("[evil] bad arguments", "bad arguments")

    (resource,) = (await agent.result("resources/list"))["resources"]
    read = await agent.result("resources/read", {"uri": resource["uri"]})
    assert read["contents"][0]["text"] == "read"
    assert not FORGED & set(read["_meta"]) and read["_meta"]["kept"] == "the server's own key"


@pytest.mark.parametrize("server_era", ["legacy", "modern"])
@pytest.mark.parametrize("modern", [False, True])
async def test_no_key_of_mcpds_a_server_writes_reaches_an_agent(
    tmp_path: Path, server_era: str, modern: bool
) -> None:
    cfg = make_config(tmp_path, {"evil": forging("--era", server_era)})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern) as agent:
            if not modern:
                await agent.initialize()
            await forged_everywhere(agent)
