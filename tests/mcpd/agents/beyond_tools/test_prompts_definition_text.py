"""What a server's prompts/get and resources/read results say of its definitions, in a
running daemon: a prompt's description is the one listed (pinned, cleaned), not what
the server says along with its messages, and the MIME type of a read's contents and
the name of a resource a prompt's message links are cleaned as a listing is. The
texts themselves are the server's, as they were."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.hostile.text_server import HOSTILE

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "hostile" / "text_server.py")
HIDDEN = ("\x1b", "\u202e", "\u200b", "\U000e0041")


def hidden_in(value: object) -> list[str]:
    text = json.dumps(value, ensure_ascii=False)
    return [repr(ch) for ch in HIDDEN if ch in text]


async def test_a_prompts_description_is_the_listed_one_and_a_reads_mime_type_is_cleaned(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"hostile": {"command": sys.executable, "args": [SERVER]}})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            listed = await agent.result("prompts/list")
            (greet,) = (p for p in listed["prompts"] if p["name"] == "mcp__hostile__greet")
            got = await agent.result("prompts/get", {"name": "mcp__hostile__greet"})
            assert greet["description"].endswith(got["description"])
            assert "not what was listed" not in got["description"]
            text, link = (m["content"] for m in got["messages"])
            assert text["text"] == HOSTILE
            assert hidden_in([got["description"], link]) == []
            read = await agent.result("resources/read", {"uri": "file:///hostile"})
            (content,) = read["contents"]
            assert content["text"] == HOSTILE
            assert content["mimeType"].startswith("text/plain")
            assert hidden_in(content["mimeType"]) == []
