"""A 2026-07-28 stdio server with one resource template, for tests.

usage: python template_server.py TEMPLATE

``resources/read`` answers any URI with a text naming it; the tool ``link`` returns
a resource link to the URI it is given, whatever that is.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TEMPLATE = sys.argv[1]


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
        schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
        result(rid, {"tools": [{"name": "link", "inputSchema": schema}], **listed})
    elif method == "tools/call":
        uri = params.get("arguments", {}).get("uri", "")
        result(rid, {"content": [{"type": "resource_link", "uri": uri, "name": "linked"}]})
    elif method == "resources/list":
        result(rid, {"resources": [], **listed})
    elif method == "resources/templates/list":
        result(rid, {"resourceTemplates": [{"uriTemplate": TEMPLATE, "name": "t"}], **listed})
    elif method == "resources/read":
        uri = params.get("uri", "")
        result(rid, {"contents": [{"uri": uri, "text": f"{TEMPLATE} read {uri}"}]})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
