"""What a server sends around a tool's result is held to bounds, through a running
daemon, in either era of the server and of the agent, spliced or not: an error's
message is cut to the text budget and its data past its bound left out, a result's
``_meta`` past its bound left out (and a content block's, or its ``annotations``), a
progress report's message cut and its ``_meta`` past its bound left out, and a report
whose progress does not go up dropped, though it still gives its call more time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.calls.result_bounds import META_BYTES, META_LEFT_OUT
from mcpd.servers.asking.progress import MESSAGE_CHARS
from tests.support.clients.agent import connect, make_config, running
from tests.support.hostile.oversized_server import DATA_CHARS, HEARTBEAT_GAP, HEARTBEATS, STEPS
from tests.support.hostile.oversized_server import MESSAGE_CHARS as SHOUTED

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "hostile" / "oversized_server.py")
BUDGET = 500
CUT = "more characters were cut here"
# (server's era, agent's era, whether replies are spliced)
WAYS = [
    ("legacy", "legacy", True),
    ("legacy", "modern", True),
    ("modern", "legacy", True),
    ("modern", "modern", True),
    ("legacy", "legacy", False),
    ("modern", "modern", False),
]


async def _session(
    tmp_path: Path,
    way: tuple[str, str, bool],
    tool: str,
    meta: dict[str, Any] | None = None,
    **daemon: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The reply to a call of ``tool``, made the ``way`` given (with the ``daemon``
    settings given), and the progress reports that came with it."""
    server, era, splice = way
    modern = era == "modern"
    big = {"command": sys.executable, "args": [SERVER, server]}
    cfg = make_config(tmp_path, {"big": big}, result_budget_chars=BUDGET, **daemon)
    with trio.fail_after(60):
        async with (
            running(cfg, splice=splice) as daemon,
            connect(daemon.socket_path, modern) as agent,
        ):
            if not modern:
                await agent.initialize()
            params: dict[str, Any] = {"name": f"mcp__big__{tool}", "arguments": {}}
            if meta is not None:
                params["_meta"] = meta
            reply = await agent.rpc("tools/call", params)
            if meta is not None:
                with trio.move_on_after(1):  # a report let through would come by now
                    await agent.wait_notifications(len(STEPS))
    method = "notifications/progress"
    return reply, [n["params"] for n in agent.notifications if n["method"] == method]


way = pytest.mark.parametrize(
    "way", WAYS, ids=[f"{s}-server-{a}-agent-{'spliced' if p else 'general'}" for s, a, p in WAYS]
)


@way
async def test_an_errors_message_is_cut_to_the_budget_and_its_data_past_its_bound_left_out(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    reply, _ = await _session(tmp_path, way, "shout")
    error = reply["error"]
    message = error["message"]
    assert message.startswith("[big] MMM"), message[:40]
    assert message.count("M") == BUDGET - len("[big] "), len(message)
    assert f"{SHOUTED + len('[big] ') - BUDGET} {CUT}" in message, message[-200:]
    assert isinstance(error["data"], str) and "was left out" in error["data"], error["data"]
    assert f"{DATA_CHARS + len(json.dumps({'d': ''}))} bytes" in error["data"]


@way
async def test_a_results_meta_past_its_bound_is_left_out_with_a_note(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    reply, _ = await _session(tmp_path, way, "meta")
    result = reply["result"]
    assert result["content"] == [{"type": "text", "text": "m"}]
    assert list(result["_meta"]) == [META_LEFT_OUT], list(result["_meta"])[:3]
    left_out = result["_meta"][META_LEFT_OUT]
    assert left_out["bound"] == META_BYTES and left_out["bytes"] > META_BYTES, left_out


@way
async def test_a_content_blocks_meta_or_annotations_past_its_bound_are_left_out_with_a_note(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    reply, _ = await _session(tmp_path, way, "block_meta")
    blocks = reply["result"]["content"]
    assert [b["text"] for b in blocks] == ["hi", "ho", "ha"]
    for block, key in ((blocks[0], "_meta"), (blocks[1], "annotations")):
        assert list(block[key]) == [META_LEFT_OUT], list(block[key])[:3]
        left_out = block[key][META_LEFT_OUT]
        assert left_out["bound"] == META_BYTES and left_out["bytes"] > META_BYTES, left_out
    # Those within the bound go on as the server wrote them.
    assert blocks[2] == {
        "type": "text",
        "text": "ha",
        "_meta": {"k": "v"},
        "annotations": {"priority": 0},
    }
    assert "_meta" not in reply["result"]


@way
async def test_a_progress_message_is_cut_and_a_report_that_does_not_go_up_dropped(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    reply, reports = await _session(tmp_path, way, "steps", {"progressToken": "p1"})
    assert reply["result"]["content"] == [{"type": "text", "text": "done"}]
    assert [r["progress"] for r in reports] == [1, 5, 6], reports
    first = reports[0]["message"]
    assert first.startswith("p" * 100) and f"{5000 - MESSAGE_CHARS} {CUT}" in first, first[-80:]
    assert len(first) < MESSAGE_CHARS + 100
    assert [r["message"] for r in reports[1:]] == ["five", "six"]


@pytest.mark.parametrize("way", [WAYS[0], WAYS[5]], ids=["legacy-spliced", "modern-general"])
async def test_a_heartbeat_that_does_not_go_up_keeps_a_call_longer_than_its_timeout(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    # Each report of progress 0 comes well within the call's time; all of them take
    # more than twice its time.
    timeout = 3 * HEARTBEAT_GAP
    assert 2 * timeout < HEARTBEATS * HEARTBEAT_GAP
    meta = {"progressToken": "p1"}
    reply, reports = await _session(tmp_path, way, "heartbeat", meta, call_timeout=timeout)
    assert reply.get("result", {}).get("content") == [{"type": "text", "text": "done"}], reply
    # Only the first is passed on: progress only goes up.
    assert [(r["progress"], r["message"]) for r in reports] == [(0, "still working (0)")]


@way
async def test_a_progress_reports_meta_past_its_bound_is_left_out_with_a_note(
    tmp_path: Path, way: tuple[str, str, bool]
) -> None:
    reply, reports = await _session(tmp_path, way, "meta_steps", {"progressToken": "p1"})
    assert reply["result"]["content"] == [{"type": "text", "text": "done"}]
    assert [r["progress"] for r in reports] == [1, 2, 3], [r["progress"] for r in reports]
    for big in reports[:2]:
        assert list(big["_meta"]) == [META_LEFT_OUT], list(big["_meta"])[:3]
        left_out = big["_meta"][META_LEFT_OUT]
        assert left_out["bound"] == META_BYTES and left_out["bytes"] > META_BYTES, left_out
    # One within the bound goes on as the server wrote it.
    assert reports[2]["_meta"] == {"k0": "v" * 100}
