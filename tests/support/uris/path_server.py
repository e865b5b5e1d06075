"""A legacy stdio server that serves files by the path of the URI it is asked for, as
many do (``open(unquote(urlparse(uri).path))``), whatever its scheme, for tests.

usage: python path_server.py FOLDER

It lists every file under FOLDER as ``file://`` and its path, the template
``file://{+path}`` and a tool that does nothing; a read opens the URI's path, or says
why it cannot.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

FOLDER = Path(sys.argv[1]).resolve()


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        caps = {"resources": {}, "tools": {}}
        info = {"name": "paths", "version": "1"}
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": caps,
            "serverInfo": info,
        }
    if method == "resources/list":
        files = sorted(p for p in FOLDER.rglob("*") if p.is_file())
        return {"resources": [{"uri": f"file://{p}", "name": p.name} for p in files]}
    if method == "resources/templates/list":
        return {"resourceTemplates": [{"uriTemplate": "file://{+path}", "name": "a file"}]}
    if method == "resources/read":
        uri = params["uri"]
        with open(unquote(urlparse(uri).path), encoding="utf-8") as f:
            return {"contents": [{"uri": uri, "text": f.read()}]}
    if method == "tools/list":
        return {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}
    if method == "ping":
        return {}
    raise LookupError(method)


for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    try:
        send({"id": msg["id"], "result": answer(msg["method"], msg.get("params") or {})})
    except LookupError as e:
        send({"id": msg["id"], "error": {"code": -32601, "message": f"no {e}"}})
    except OSError as e:
        send({"id": msg["id"], "error": {"code": -32002, "message": f"cannot read: {e}"}})
