"""A 2026-07-28 stdio server that refuses a ``subscriptions/listen`` naming a URI it
does not list, as an honest server may.

usage: python listen_refusing.py URI[,URI...]

It lists the URIs given. A listen naming only those is acknowledged and held open
until the client cancels it; one naming another is answered -32602. The tool
``touch`` (``{"uri": ...}``) waits until a listen naming the URI is open, tells the
update on each such listen, and answers how many it told; the tool ``refusals``
waits until a listen was refused, and answers how many were.
"""

from __future__ import annotations

import json
import sys
from typing import Any

URIS = [x for x in sys.argv[1].split(",") if x]
ID = "io.modelcontextprotocol/subscriptionId"

listens: dict[str, list[str]] = {}  # open listens (their ids, as JSON) and their URIs
touches: list[tuple[Any, str]] = []  # touches waiting for a listen naming their URI
waiting_refusal: list[Any] = []
refused = 0


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def said(rid: Any, text: str) -> None:
    result(rid, {"content": [{"type": "text", "text": text}]})


def touch_now() -> None:
    for rid, uri in list(touches):
        told = [lid for lid, uris in listens.items() if uri in uris]
        if told:
            touches.remove((rid, uri))
            for lid in told:
                params = {"_meta": {ID: json.loads(lid)}, "uri": uri}
                send({"method": "notifications/resources/updated", "params": params})
            said(rid, f"told {len(told)}")


def listen(rid: Any, wanted: dict[str, Any]) -> None:
    global refused
    uris = wanted.get("resourceSubscriptions") or []
    unknown = [uri for uri in uris if uri not in URIS]
    if unknown:
        refused += 1
        send({"id": rid, "error": {"code": -32602, "message": f"Resource not found: {unknown[0]}"}})
        for waiting in waiting_refusal:
            said(waiting, f"refused {refused}")
        waiting_refusal.clear()
        return
    listens[json.dumps(rid)] = list(uris)
    params = {"_meta": {ID: rid}, "notifications": wanted}
    send({"method": "notifications/subscriptions/acknowledged", "params": params})
    touch_now()


def call(rid: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "touch":
        touches.append((rid, str(arguments.get("uri", ""))))
        touch_now()
    elif refused:
        said(rid, f"refused {refused}")
    else:
        waiting_refusal.append(rid)


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method == "server/discover":
        caps = {"tools": {}, "resources": {"subscribe": True}}
        listed = {"ttlMs": 0, "cacheScope": "private"}
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps, **listed})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
        tools = [{"name": name, "inputSchema": schema} for name in ("touch", "refusals")]
        result(rid, {"tools": tools, "ttlMs": 0, "cacheScope": "private"})
    elif method == "tools/call":
        call(rid, params.get("name"), params.get("arguments") or {})
    elif method == "resources/list":
        resources = [{"uri": uri, "name": uri} for uri in URIS]
        result(rid, {"resources": resources, "ttlMs": 0, "cacheScope": "private"})
    elif method == "resources/templates/list":
        result(rid, {"resourceTemplates": [], "ttlMs": 0, "cacheScope": "private"})
    elif method == "subscriptions/listen":
        listen(rid, params.get("notifications") or {})
    elif method == "notifications/cancelled":
        listens.pop(json.dumps(params.get("requestId")), None)
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
