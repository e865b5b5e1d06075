"""The JSON pages people read with curl (/status, /tools, /prompts, /resources, /healthz),
on the socket and on the TCP endpoint, write a server's C1 controls and format
characters as ``\\uXXXX`` escapes, as they write C0 controls: nothing of a server's
acts on the terminal or reorders it. What a program decodes is unchanged. Replies to
MCP requests carry the server's text as it was (agents decode JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from protocol.shown.visible import visible
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import auth, http, socket_get
from tests.support.hostile.text_server import HOSTILE, ODD

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "hostile" / "text_server.py")
PAGES = ("/status", "/tools", "/prompts", "/resources", "/healthz")
# A one-byte CSI, the bidi controls and the zero-width space, encoded as UTF-8.
RAW = ("\x9b", "\u202e", "\u2069", "\u200b", "\U000e0041")


def raw_in(body: bytes) -> list[str]:
    return [repr(ch) for ch in RAW if ch.encode() in body]


async def test_the_json_pages_escape_a_servers_hidden_characters(tmp_path: Path) -> None:
    servers = {
        "evil": {"command": sys.executable, "args": [SERVER]},
        "broken": {"command": sys.executable, "args": [SERVER, "--fail"]},
    }
    cfg = make_config(
        tmp_path,
        servers,
        backoff_base=30,
        backoff_cap=60,
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            bodies: dict[str, bytes] = {}
            for page in PAGES:
                bodies[f"socket {page}"] = await socket_get(daemon.socket_path, page)
                bodies[f"tcp {page}"] = (await http(port, "GET", page, auth(token))).body
            for where, body in bodies.items():
                assert raw_in(body) == [], (where, body)
                json.loads(body)
            # What a program reads from them is what mcpd said of the server's items (their
            # names, written out). A URI is how a resource is read, so it cannot be
            # cleaned: the resource whose URI hides characters is not listed, and the
            # status says so, written out.
            uris = [r["uri"] for r in json.loads(bodies["socket /resources"])["resources"]]
            assert uris == ["file:///hostile"]
            status = json.loads(bodies["socket /status"])["servers"]
            (evil,) = (s for s in status if s["alias"] == "evil")
            assert evil["dropped_resources"] == [
                f"file:///{visible(ODD)}: its URI holds invisible or control characters"
            ]
            tools = json.loads(bodies["tcp /tools"])["tools"]
            assert visible(ODD) in [t["_meta"]["mcpd/originalName"] for t in tools]
            prompts = json.loads(bodies["socket /prompts"])["prompts"]
            assert visible(ODD) in [p["_meta"]["mcpd/originalName"] for p in prompts]
            (broken,) = (
                s for s in json.loads(bodies["socket /status"])["servers"] if s["alias"] == "broken"
            )
            assert HOSTILE.splitlines()[-1] in "\n".join(broken["stderr"])
            assert "\\u202e" in bodies["socket /status"].decode()
            # An agent's reply is JSON for a program: its text is left as it is.
            async with connect(daemon.socket_path) as agent:
                read = await agent.result("resources/read", {"uri": "file:///hostile"})
            assert read["contents"][0]["text"] == HOSTILE
