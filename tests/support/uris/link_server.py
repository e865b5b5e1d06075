"""A 2026-07-28 stdio server whose resource templates and tool results have a shape
chosen on the command line, for tests of what routing URIs costs.

usage: python link_server.py SHAPE

- ``good``: the template ``file:///{+path}``; ``link`` returns a text and one link.
- ``long-links``: a template of 32 expressions; ``link`` returns 250 links of 8 KB
  that no template can match within a route's budget.
- ``many-templates``: 2,000 short templates; ``link`` returns 80,000 links to one URI
  that one of them matches.
- ``long-uris``: 20 resources whose URIs climb ``/..`` for 200,000 characters and a
  template as long, past any a list may hold; 300 whose URIs climb just short of
  that bound, more than a list's URIs may hold in all; ``file:///etc/passwd`` and
  ``file:///evil.md``.

``resources/read`` answers any URI with a text naming it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SHAPE = sys.argv[1]
LONG = "e://" + "".join(f"{{+v{i}}}" for i in range(32)) + "X"
CLIMB = "%2e%2e/"
TEMPLATES = {
    "good": ["file:///{+path}"],
    "long-links": [LONG],
    "many-templates": [f"h{i}://{{x}}" for i in range(2000)],
    "long-uris": ["file:///{+path}", "file:///" + CLIMB * 30_000 + "{+path}"],
}[SHAPE]
RESOURCES = {
    "good": ["file:///README.md"],
    "long-links": ["h://a"],
    "many-templates": ["h://b"],
    "long-uris": [
        *(f"file:///{CLIMB * 30_000}{i}" for i in range(20)),
        *(f"file:///{CLIMB * 1_150}{i:03}" for i in range(300)),
        "file:///etc/passwd",
        "file:///evil.md",
    ],
}[SHAPE]


def links() -> list[dict[str, Any]]:
    if SHAPE == "long-links":
        uris = ["e://" + "a" * 8000 + str(i) for i in range(250)]
    elif SHAPE == "many-templates":
        uris = ["h7://" + "a" * 20] * 80_000
    else:
        return [{"type": "text", "text": "ok"}, link("file:///notes.md")]
    return [link(uri) for uri in uris]


def link(uri: str) -> dict[str, Any]:
    return {"type": "resource_link", "uri": uri, "name": "x"}


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    listed = {"ttlMs": 0, "cacheScope": "private"}
    if method == "server/discover":
        caps = {"tools": {}, "resources": {}}
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps, **listed})
    elif method == "tools/list":
        result(rid, {"tools": [{"name": "link", "inputSchema": {"type": "object"}}], **listed})
    elif method == "tools/call":
        result(rid, {"content": links()})
    elif method == "resources/list":
        result(rid, {"resources": [{"uri": uri, "name": "r"} for uri in RESOURCES], **listed})
    elif method == "resources/templates/list":
        shown = [{"uriTemplate": t, "name": "t"} for t in TEMPLATES]
        result(rid, {"resourceTemplates": shown, **listed})
    elif method == "resources/read":
        uri = params.get("uri", "")
        result(rid, {"contents": [{"uri": uri, "text": f"{SHAPE} read {uri[:40]}"}]})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
