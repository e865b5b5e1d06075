"""A 2026-07-28 stdio server with a prompt and a resource it never gives, for tests.

``prompts/get`` of ``never`` and ``resources/read`` of ``file:///never`` are read and
never answered; ``prompts/get`` of ``echo`` is answered with its argument ``text``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

NEVER_URI = "file:///never"


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    listed = {"ttlMs": 0, "cacheScope": "private"}
    argument = [{"name": "text"}]
    if method == "server/discover":
        caps = {"tools": {}, "prompts": {}, "resources": {}}
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps, **listed})
    elif method == "tools/list":
        result(rid, {"tools": [], **listed})
    elif method == "prompts/list":
        prompts = [{"name": name, "arguments": argument} for name in ("never", "echo")]
        result(rid, {"prompts": prompts, **listed})
    elif method == "resources/list":
        result(rid, {"resources": [{"uri": NEVER_URI, "name": "never"}], **listed})
    elif method == "resources/templates/list":
        result(rid, {"resourceTemplates": [], **listed})
    elif method == "prompts/get" and params.get("name") == "echo":
        text = params.get("arguments", {}).get("text", "")
        message = {"role": "user", "content": {"type": "text", "text": text}}
        result(rid, {"messages": [message]})
    elif method in ("prompts/get", "resources/read"):
        return
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
