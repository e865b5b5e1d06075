"""A request whose text cannot be read as text (half an emoji's surrogate pair, bytes
that are not UTF-8, a byte order mark in front) is answered under its own id, saying
what is wrong, in both eras."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.system.procs import scripted


def _call_line(rid: int, text: bytes, modern: bool) -> bytes:
    params = {"name": "mcp__s__tool0", "arguments": {"text": "@"}}
    if modern:
        params["_meta"] = META
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    return line.encode().replace(b'"@"', b'"' + text + b'"') + b"\n"


async def _answer(agent: Agent, line: bytes) -> dict[str, object]:
    await agent.send_raw(line)
    (reply,) = await agent.wait_unmatched(1)
    agent.unmatched.clear()
    return reply


@pytest.mark.parametrize("modern", [True, False])
async def test_a_call_with_half_a_character_is_answered_under_its_id(
    tmp_path: Path, modern: bool
) -> None:
    command, args = scripted()
    cfg = make_config(tmp_path, {"s": {"command": command, "args": list(args)}})
    with trio.fail_after(60):
        async with running(cfg), connect(cfg.socket_path(), modern) as agent:
            if not modern:
                await agent.initialize()
            # What JSON.stringify writes for the first half of an emoji cut in two.
            cut = await _answer(agent, _call_line(41, b"smile \\ud83d", modern))
            assert cut["id"] == 41
            error = cut["error"]
            assert isinstance(error, dict)
            assert "lone UTF-16 surrogate (\\ud83d), half of a character" in error["message"]
            broken = await _answer(agent, _call_line(42, b"caf\xe9", modern))
            assert broken["id"] == 42
            error = broken["error"]
            assert isinstance(error, dict)
            assert "not UTF-8 (invalid continuation byte at byte" in error["message"]
            marked = await _answer(agent, b"\xef\xbb\xbf" + _call_line(43, b"x", modern))
            assert marked["id"] == 43
            error = marked["error"]
            assert isinstance(error, dict)
            assert "byte order mark (U+FEFF) in front" in error["message"]
            # A whole pair is a character like any other.
            whole = await agent.call("mcp__s__tool0", {"text": "smile \U0001f600"})
            assert whole["content"][0]["text"] == "tool0:smile \U0001f600"
