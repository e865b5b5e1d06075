"""A stdio MCP server whose definitions a test rewrites while it runs: a server that
changes what it says its tools, prompts and templates are, after it was approved.

    python changing.py DEFINITIONS.json LOG [--era both|legacy|modern]

``DEFINITIONS.json`` is read again for every list and greeting: ``{"tools": [...],
"prompts": [...], "resources": [...], "resourceTemplates": [...], "instructions":
"...", "capabilities": {...}, "serverInfo": {...}, "era": "legacy"}`` (what it
declares instead of every list, its name and version, in either era, and the era it
speaks now in place of ``--era``, as a server deployed anew does: a legacy one refuses
a call made for 2026-07-28 with -32022); a tool given as a
string is JSON text listed as it is written (a key given twice and all). Calling its
tool ``relist`` (always listed as it is) makes it announce that all three lists
changed: unsolicited to a legacy client, on the open ``subscriptions/listen`` to a
modern one (of the three, those that listen asked about). Each call, get, read,
completion and subscription it answers is appended to ``LOG`` (``tools/call NAME``),
so a test can tell what reached it. Plain stdlib, so it starts fast.

With ``--control FIFO`` it lists a tool ``hold`` too, whose calls it answers only when
a test writes ``answer`` into the FIFO; ``announce`` written there meanwhile makes it
announce that its lists changed, as ``relist`` does, while its calls are all taken.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

MODERN = "2026-07-28"
RELIST = {
    "name": "relist",
    "description": "Announce that the lists changed.",
    "inputSchema": {"type": "object"},
}
CAPABILITIES = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "completions": {},
}

path, log_path = sys.argv[1], sys.argv[2]
era = sys.argv[sys.argv.index("--era") + 1] if "--era" in sys.argv else "both"
control = sys.argv[sys.argv.index("--control") + 1] if "--control" in sys.argv else None
HOLD = {"name": "hold", "description": "Answer when told.", "inputSchema": {"type": "object"}}
lock = threading.Lock()
state: dict[str, Any] = {"era": None, "listen": None, "asked": {}}


def write(msg: dict[str, Any]) -> None:
    write_line(json.dumps(msg))


def write_line(line: str) -> None:
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def list_tools(rid: Any) -> None:
    """The tools, those given as JSON text spliced in as they are written."""
    texts = [t if isinstance(t, str) else json.dumps(t) for t in definitions().get("tools", [])]
    body: dict[str, Any] = {"tools": "TOOLS"}
    if state["era"] == "modern":
        body["resultType"] = "complete"
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "result": body})
    own = [RELIST, HOLD] if control is not None else [RELIST]
    listed = [*(json.dumps(t) for t in own), *texts]
    write_line(line.replace('"TOOLS"', "[" + ",".join(listed) + "]"))


def result(rid: Any, res: dict[str, Any]) -> None:
    if state["era"] == "modern":
        res.setdefault("resultType", "complete")
    write({"jsonrpc": "2.0", "id": rid, "result": res})


def error(rid: Any, code: int, message: str, data: Any = None) -> None:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    write({"jsonrpc": "2.0", "id": rid, "error": err})


def definitions() -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def era_now() -> str:
    return str(definitions().get("era", era))


def logged(line: str) -> None:
    with open(log_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def announce() -> None:
    """Each list's change: on a modern listen, only the lists it asked about."""
    listen = state["listen"]
    for kind in ("tools", "prompts", "resources"):
        method = f"notifications/{kind}/list_changed"
        if state["era"] == "modern":
            if listen is None or f"{kind}ListChanged" not in state["asked"]:
                continue
            params = {"_meta": {"io.modelcontextprotocol/subscriptionId": listen}}
            write({"jsonrpc": "2.0", "method": method, "params": params})
        else:
            write({"jsonrpc": "2.0", "method": method})


def hold(rid: Any) -> None:
    """Answer the call ``rid`` once the control FIFO says ``answer``; announce what it
    says to before that. Each writer's words are read whole, to its closing."""
    assert control is not None
    while True:
        with open(control, encoding="utf-8") as fifo:
            said = fifo.read().split()
        if "announce" in said:
            announce()
        if "answer" in said:
            break
    result(rid, {"content": [{"type": "text", "text": "called hold"}]})


def handle(msg: dict[str, Any]) -> None:
    method, rid = msg.get("method"), msg.get("id")
    params = msg.get("params") or {}
    if rid is None:
        return
    if method == "server/discover":
        if era_now() == "legacy":
            error(rid, -32601, "Method not found")
            return
        state["era"] = "modern"
        given = definitions()
        capabilities = given.get("capabilities", CAPABILITIES)
        body = {"supportedVersions": [MODERN], "capabilities": capabilities, "ttlMs": 0}
        if given.get("instructions") is not None:
            body["instructions"] = given["instructions"]
        if "serverInfo" in given:
            body["_meta"] = {"io.modelcontextprotocol/serverInfo": given["serverInfo"]}
        result(rid, body)
    elif method == "initialize":
        if era_now() == "modern":
            error(rid, -32022, "modern only", {"supported": [MODERN]})
            return
        state["era"] = "legacy"
        given = definitions()
        body = {
            "protocolVersion": "2025-11-25",
            "capabilities": given.get("capabilities", CAPABILITIES),
            "serverInfo": given.get("serverInfo", {"name": "changing", "version": "1"}),
        }
        if given.get("instructions") is not None:
            body["instructions"] = given["instructions"]
        result(rid, body)
    elif method == "tools/list":
        list_tools(rid)
    elif method == "prompts/list":
        result(rid, {"prompts": definitions().get("prompts", [])})
    elif method == "resources/list":
        result(rid, {"resources": definitions().get("resources", [])})
    elif method == "resources/templates/list":
        result(rid, {"resourceTemplates": definitions().get("resourceTemplates", [])})
    elif method == "tools/call":
        name = params.get("name")
        logged(f"tools/call {name}")
        version = (params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
        if version is not None and era_now() == "legacy":
            said = {"supported": ["2025-11-25"], "requested": version}
            error(rid, -32022, "Unsupported protocol version", said)
            return
        if name == "relist":
            result(rid, {"content": [{"type": "text", "text": "announced"}]})
            announce()
            return
        if name == "hold" and control is not None:
            threading.Thread(target=hold, args=(rid,), daemon=True).start()
            return
        result(rid, {"content": [{"type": "text", "text": f"called {name}"}]})
    elif method == "prompts/get":
        logged(f"prompts/get {params.get('name')}")
        text = {"type": "text", "text": f"prompt {params.get('name')}"}
        result(rid, {"messages": [{"role": "user", "content": text}]})
    elif method == "resources/read":
        uri = params.get("uri")
        logged(f"resources/read {uri}")
        result(rid, {"contents": [{"uri": uri, "text": f"read {uri}"}]})
    elif method in ("resources/subscribe", "resources/unsubscribe"):
        logged(f"{method} {params.get('uri')}")
        result(rid, {})
    elif method == "completion/complete":
        logged(f"completion/complete {(params.get('ref') or {}).get('uri')}")
        result(rid, {"completion": {"values": ["completed"]}})
    elif method == "subscriptions/listen":
        state["listen"] = rid
        honoured = {k: True for k, v in (params.get("notifications") or {}).items() if v is True}
        state["asked"] = honoured
        write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "_meta": {"io.modelcontextprotocol/subscriptionId": rid},
                    "notifications": honoured,
                },
            }
        )
    elif method == "ping":
        result(rid, {})
    else:
        error(rid, -32601, f"Method not found: {method}")


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            handle(json.loads(line))


main()
