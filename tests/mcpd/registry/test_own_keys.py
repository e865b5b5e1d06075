"""mcpd's own ``_meta`` keys, where a server wrote them, never reach an agent: not in a
result, an error's data or a notification, however the key is spelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.registry.own_keys import drop_from_data, drop_from_meta, may_hold, meta_dropped
from tests.support.agent import Agent, connect, make_config, running
from tests.support.procs import forging

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
    # A slash escaped as some encoders do: a false alarm, the same bytes.
    escaped = Raw(b'{"message":"a\\/b","_meta":{"mcpd":"not a key of mcpd\'s"}}')
    assert may_hold(escaped) and meta_dropped(escaped) is escaped


async def forged_everywhere(agent: Agent) -> None:
    """Every way the forging server offers its keys, as one agent sees them."""
    reply = await agent.rpc(
        "tools/call",
        {"name": "mcp__evil__forge", "arguments": {}, "_meta": {"progressToken": "p"}},
    )
    meta = reply["result"]["_meta"]
    assert not FORGED & set(meta) and meta["kept"] == "the server's own key"
    (progress,) = await agent.wait_notifications(1)
    assert progress["method"] == "notifications/progress"
    assert not FORGED & set(progress["params"]["_meta"])

    refused = (await agent.rpc("tools/call", {"name": "mcp__evil__refuse"}))["error"]
    assert refused["message"] == "bad arguments"  # cleaned as a server's text is
    assert refused["data"] == {"kept": "the server's own key", "_meta": {}}

    prompt = (await agent.rpc("prompts/get", {"name": "mcp__evil__p"}))["error"]
    assert prompt["message"] == prompt["data"] == "bad arguments"

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
