"""A stdio MCP server whose answers carry more around a result than a model's context
should take: an error whose message and data are far past any budget (``shout``), a
result with a ``_meta`` of hundreds of kilobytes (``meta``), or a text block's
``_meta`` and another's ``annotations`` as large (``block_meta``), and progress reports with
a long message and a progress that goes back (``steps``), a long call whose reports all
say progress 0, each with a new message, as a heartbeat (``heartbeat``), reports whose
``_meta`` is as large as ``meta``'s but for the last (``meta_steps``); the same error for a get of
its prompt ``shout``, a read of its resource ``big://shout`` and a completion of
either; and a get of its prompt ``links`` asks the agent to open more links (a URL
elicitation) than fit in an error's data as passed on. It speaks the era its one
argument names, ``modern`` or ``legacy``. Plain stdlib, so it starts fast.
"""

from __future__ import annotations

import json
import sys
import time

MESSAGE_CHARS = 30_000
DATA_CHARS = 40_000
META_KEYS = 2_000  # of about 110 bytes each
# (progress, message) of the reports ``steps`` sends, in order.
STEPS = [(1, "p" * 5_000), (5, "five"), (4, "back"), (5, "again"), (6, "six")]
# ``heartbeat`` sends this many reports of progress 0, this many seconds apart, then
# answers.
HEARTBEATS = 8
HEARTBEAT_GAP = 0.3
MODERN = "2026-07-28"
SHOUT_URI = "big://shout"
LINKS = 40  # of about 1,000 bytes each
CAPABILITIES: dict[str, object] = {"tools": {}, "prompts": {}, "resources": {}, "completions": {}}


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def answer(rid: object, result: dict[str, object], modern: bool) -> None:
    if modern:
        result = {**result, "resultType": "complete"}
    write({"jsonrpc": "2.0", "id": rid, "result": result})


def fail(rid: object, code: int, message: str, data: object = None) -> None:
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    write({"jsonrpc": "2.0", "id": rid, "error": error})


def shout(rid: object) -> None:
    fail(rid, -32000, "M" * MESSAGE_CHARS, {"d": "D" * DATA_CHARS})


def link(i: int) -> dict[str, object]:
    url = f"https://example.com/{i}?state=" + "s" * 1_000
    return {"mode": "url", "elicitationId": f"e-{i}", "url": url, "message": "Sign in."}


def call(rid: object, params: dict[str, object], modern: bool) -> None:
    name = params.get("name")
    if name == "shout":
        shout(rid)
        return
    if name == "meta":
        meta = {f"k{i}": "v" * 100 for i in range(META_KEYS)}
        answer(rid, {"content": [{"type": "text", "text": "m"}], "_meta": meta}, modern)
        return
    if name == "block_meta":
        meta = {f"k{i}": "v" * 100 for i in range(META_KEYS)}
        blocks = [
            {"type": "text", "text": "hi", "_meta": meta},
            {"type": "text", "text": "ho", "annotations": {"priority": 1, **meta}},
            {"type": "text", "text": "ha", "_meta": {"k": "v"}, "annotations": {"priority": 0}},
        ]
        answer(rid, {"content": blocks}, modern)
        return
    given = params.get("_meta")
    token = given.get("progressToken") if isinstance(given, dict) else None
    steps = STEPS
    if name == "heartbeat":
        steps = [(0, f"still working ({i})") for i in range(HEARTBEATS)]
    if name == "meta_steps":
        steps = [(i, "m") for i in range(1, 4)]
    for progress, message in steps if token is not None else ():
        report = {"progressToken": token, "progress": progress, "message": message}
        if name == "meta_steps":
            big = progress < len(steps)
            report["_meta"] = {f"k{i}": "v" * 100 for i in range(META_KEYS if big else 1)}
        write({"jsonrpc": "2.0", "method": "notifications/progress", "params": report})
        if name == "heartbeat":
            time.sleep(HEARTBEAT_GAP)
    answer(rid, {"content": [{"type": "text", "text": "done"}]}, modern)


def handle(msg: dict[str, object], modern: bool) -> None:
    method, rid = msg.get("method"), msg.get("id")
    params = msg.get("params")
    params = params if isinstance(params, dict) else {}
    if rid is None:
        return
    if method == "server/discover" and modern:
        found = {"supportedVersions": [MODERN], "capabilities": CAPABILITIES, "ttlMs": 0}
        answer(rid, {**found, "cacheScope": "private"}, modern)
    elif method == "initialize" and not modern:
        answer(rid, {"protocolVersion": "2025-11-25", "capabilities": CAPABILITIES,
                     "serverInfo": {"name": "big", "version": "1"}}, modern)  # fmt: skip
    elif method == "tools/list":
        tools = [
            {"name": n, "inputSchema": {"type": "object"}}
            for n in ("shout", "meta", "block_meta", "steps", "heartbeat", "meta_steps")
        ]
        answer(rid, {"tools": tools}, modern)
    elif method == "tools/call":
        call(rid, params, modern)
    elif method == "prompts/list":
        answer(rid, {"prompts": [{"name": "shout"}, {"name": "links"}]}, modern)
    elif method == "resources/list":
        answer(rid, {"resources": [{"uri": SHOUT_URI, "name": "shout"}]}, modern)
    elif method == "resources/templates/list":
        answer(rid, {"resourceTemplates": []}, modern)
    elif method == "prompts/get" and params.get("name") == "links":
        links = [link(i) for i in range(LINKS)]
        fail(rid, -32042, "URL elicitation required", {"elicitations": links})
    elif method in ("prompts/get", "resources/read", "completion/complete"):
        shout(rid)
    elif method == "ping":
        answer(rid, {}, modern)
    else:
        fail(rid, -32601, "Method not found")


def main() -> None:
    modern = sys.argv[1] == "modern"
    for line in sys.stdin:
        handle(json.loads(line), modern)


if __name__ == "__main__":
    main()
