"""A legacy (2025-11-25) server has no rounds of input and no ``resultType``, through a
running daemon: what it writes under ``resultType`` is not acted on (its result is a
plain result, for agents of either era), and it is never sent what would continue a
round."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.daemon import Daemon
from mcpd.servers.calling.calls import Call
from mcpd.servers.calling.outgoing_meta import CallMeta
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.answering import connect_answering
from tests.support.system.procs import scripted

LIMIT = 60
NAME = {"action": "accept", "content": {"name": "mallory"}}


@asynccontextmanager
async def legacy_server(tmp_path: Path) -> AsyncIterator[Daemon]:
    command, args = scripted(
        "--era",
        "legacy",
        "--names",
        "ask,typed",
        "--log-file",
        str(tmp_path / "server.in"),
    )
    config = make_config(tmp_path, {"s": {"command": command, "args": list(args)}})
    async with running(config) as daemon:
        yield daemon


def calls_reached(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "server.in").read_text().splitlines()
    sent = [json.loads(x) for x in lines if x.strip()]
    return [m["params"] for m in sent if m.get("method") == "tools/call"]


async def both_eras(daemon: Daemon, name: str, arguments: dict[str, Any]) -> list[Any]:
    """The results of calling ``name`` as a legacy agent that can answer a form (its
    user gives a name), then as a 2026-07-28 agent that can too."""
    results = []
    async with connect_answering(daemon.socket_path, False, lambda m, p: NAME) as legacy:
        await legacy.initialize_with({"elicitation": {}})
        results.append(await legacy.call(name, arguments))
        assert legacy.asked == []
    async with connect(daemon.socket_path) as modern:
        caps = {"elicitation": {}}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
        }
        params = {"name": name, "arguments": arguments, "_meta": meta}
        results.append(await modern.result("tools/call", params))
    return results


async def test_a_legacy_servers_input_required_is_no_round_in_either_era(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon:
            legacy, modern = await both_eras(daemon, "mcp__s__ask", {})
    # Each agent's call reached the server once: nobody was asked, nothing sent again.
    assert len(calls_reached(tmp_path)) == 2
    # Read as a plain result, it is one with no content: the server's malformed result.
    for result in (legacy, modern):
        assert result["isError"] is True
        assert "returned a malformed result: no content" in result["content"][0]["text"]
    assert "resultType" not in legacy and modern["resultType"] == "complete"
    assert not str(modern.get("requestState", "")).startswith("mcpd-round:")


@pytest.mark.parametrize("kind", ["weird", "task", "input_required", "complete"])
async def test_a_legacy_servers_result_type_is_left_out(tmp_path: Path, kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon:
            legacy, modern = await both_eras(daemon, "mcp__s__typed", {"kind": kind})
    assert legacy == {"content": [{"type": "text", "text": "typed"}]}
    assert modern == {"resultType": "complete", "content": [{"type": "text", "text": "typed"}]}


@pytest.mark.parametrize(("era", "sent"), [("legacy", False), ("modern", True)])
def test_only_a_modern_server_is_sent_what_continues_a_round(era: str, sent: bool) -> None:
    meta = CallMeta()
    meta.adopt(era, "2025-11-25" if era == "legacy" else "2026-07-28")  # type: ignore[arg-type]
    call = Call(1, "t", Raw(b"{}"), None, None)  # type: ignore[arg-type]
    call.input_responses, call.request_state = Raw(b'{"k":{}}'), Raw(b'"s"')
    params = meta.params(call)
    assert (params.inputResponses == Raw(b'{"k":{}}')) is sent
    assert (params.requestState == Raw(b'"s"')) is sent
