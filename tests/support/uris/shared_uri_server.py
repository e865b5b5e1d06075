"""A 2026-07-28 stdio server that lists the URIs, templates and prompts it is given,
for tests of what one server's lists tell agents about another's.

usage: python shared_uri_server.py NAME URIS TEMPLATES PROMPTS

URIS, TEMPLATES and PROMPTS are comma-separated (may be empty). ``resources/read``
answers any URI with a text naming this server; ``completion/complete`` offers this
server's name (a hundred thousand values for "all"); the tool ``link`` and every
prompt return a resource link to the URI given (the first listed URI for a prompt);
a subscription to resources is acknowledged and held open; the tool ``touch`` says
the URI given was updated.
"""

from __future__ import annotations

import json
import sys
from typing import Any

NAME = sys.argv[1]
URIS, TEMPLATES, PROMPTS = ([x for x in arg.split(",") if x] for arg in sys.argv[2:5])
LISTED = {"ttlMs": 0, "cacheScope": "private"}


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def link(uri: str) -> dict[str, Any]:
    return {"type": "resource_link", "uri": uri, "name": "linked"}


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method == "server/discover":
        caps = {
            "tools": {},
            "resources": {"subscribe": True},
            "prompts": {},
            "completions": {},
        }
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps, **LISTED})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
        tools = [{"name": name, "inputSchema": schema} for name in ("link", "touch")]
        result(rid, {"tools": tools, **LISTED})
    elif method == "tools/call":
        uri = params.get("arguments", {}).get("uri", "")
        if params.get("name") == "touch":
            send({"method": "notifications/resources/updated", "params": {"uri": uri}})
            result(rid, {"content": []})
        else:
            result(rid, {"content": [link(uri)]})
    elif method == "resources/list":
        result(rid, {"resources": [{"uri": u, "name": u} for u in URIS], **LISTED})
    elif method == "resources/templates/list":
        templates = [{"uriTemplate": t, "name": t} for t in TEMPLATES]
        result(rid, {"resourceTemplates": templates, **LISTED})
    elif method == "resources/read":
        uri = params.get("uri", "")
        result(rid, {"contents": [{"uri": uri, "text": f"{NAME} read {uri}"}]})
    elif method == "prompts/list":
        result(rid, {"prompts": [{"name": p} for p in PROMPTS], **LISTED})
    elif method == "prompts/get":
        message = {"role": "user", "content": link(URIS[0])}
        result(rid, {"messages": [message]})
    elif method == "completion/complete":
        if params.get("argument", {}).get("value") == "all":  # far more than a reply holds
            result(rid, {"completion": {"values": [f"{NAME}-{i}" for i in range(100_000)]}})
        else:
            result(rid, {"completion": {"values": [NAME]}})
    elif method == "subscriptions/listen":
        meta = {"io.modelcontextprotocol/subscriptionId": rid}
        wanted = params.get("notifications") or {}
        params = {"_meta": meta, "notifications": wanted}
        send({"method": "notifications/subscriptions/acknowledged", "params": params})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
