"""A stdio MCP server whose tools answer with replies no client should take, for tests.

    python misreplying.py [--legacy]

With ``--legacy`` it speaks the initialize handshake (2025-06-18), else 2026-07-28.
Tools, each answering its call with: ``echo``, how many calls the server has read and
the arguments it got (``"N:{...}"``); ``big_integer``, a content block holding an
integer of 100,000 digits; ``big_double``, ``structuredContent`` holding ``1e999999``;
``no_content`` and ``null_content``, a result with no ``content`` or ``content: null``;
``batch``, its reply as a JSON-RPC batch of one; ``twice_named``, a reply giving its
``"id"`` twice, the call's first and a string after it. Plain stdlib.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "2026-07-28"
LEGACY = "--legacy" in sys.argv[1:]
TOOLS = (
    "echo",
    "big_integer",
    "big_double",
    "no_content",
    "null_content",
    "batch",
    "twice_named",
)
calls = 0


def send(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def complete(fields: str) -> str:
    """A result's members, JSON text without its braces, as the era has them."""
    return fields if LEGACY else f'"resultType":"complete",{fields}'


def reply(rid: Any, result: str) -> None:
    send(f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"result":{{{result}}}}}')


def call(rid: Any, name: str, arguments: Any) -> None:
    said = json.dumps([{"type": "text", "text": name}])
    if name == "echo":
        text = f"{calls}:{json.dumps(arguments, sort_keys=True)}"
        reply(rid, complete(f'"content":{json.dumps([{"type": "text", "text": text}])}'))
    elif name == "big_integer":
        block = '{"type":"text","text":"big","x":' + "9" * 100_000 + "}"
        reply(rid, complete(f'"content":[{block}]'))
    elif name == "big_double":
        reply(rid, complete(f'"content":{said},"structuredContent":{{"n":1e999999}}'))
    elif name == "no_content":
        reply(rid, complete('"task":{"taskId":"x"}'))
    elif name == "null_content":
        reply(rid, complete('"content":null'))
    elif name == "batch":
        body = complete(f'"content":{said}')
        send(f'[{{"jsonrpc":"2.0","id":{json.dumps(rid)},"result":{{{body}}}}}]')
    elif name == "twice_named":
        body = complete(f'"content":{said}')
        send(f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"id":"zzz","result":{{{body}}}}}')


def handle(msg: dict[str, Any]) -> None:
    global calls
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if rid is None:
        return
    if method == "server/discover" and not LEGACY:
        found = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}, "ttlMs": 0}
        reply(rid, complete(json.dumps(found)[1:-1]))
    elif method == "initialize" and LEGACY:
        info = {"name": "misreplying", "version": "1"}
        opened = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}
        reply(rid, json.dumps({**opened, "serverInfo": info})[1:-1])
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        reply(rid, complete(json.dumps({"tools": tools})[1:-1]))
    elif method == "tools/call":
        calls += 1
        call(rid, str(params.get("name")), params.get("arguments"))
    else:
        error = {"code": -32601, "message": f"no {method}"}
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}))


for line in sys.stdin:
    if line.strip():
        try:
            msg = json.loads(line)
        except ValueError:
            print(f"could not read a line: {line[:80]!r}", file=sys.stderr, flush=True)
            continue
        handle(msg)
