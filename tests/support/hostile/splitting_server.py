"""A legacy stdio MCP server that repeats a secret it should not have (``LEAK`` in its
environment) split by a character mcpd's cleaning takes out (``SPLIT``: a zero-width
space, say, a BEL or a right-to-left override), so that none of its bytes hold the
secret whole and only what cleaning makes of them does. Its instructions, its tool
``search``'s title, description and a property's description, its prompt's and its
resource's descriptions hold it so. Its second tool and second prompt are named after
the secret with each ``_`` a ``.``, which mcpd's local names make ``_`` again. Plain
stdlib, so it starts fast."""

from __future__ import annotations

import json
import os
import sys

LEAK_ENV = "LEAK"
SPLIT_ENV = "SPLIT"
LEAK = os.environ.get(LEAK_ENV, "")
SPLIT = LEAK[:5] + os.environ.get(SPLIT_ENV, "\u200b") + LEAK[5:]
NAMED = LEAK.replace("_", ".")

SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": f"q {SPLIT}"}}}
TOOLS = [
    {
        "name": "search",
        "title": f"T {SPLIT}",
        "description": f"finds {SPLIT}",
        "inputSchema": SCHEMA,
    },
    {"name": NAMED, "description": "innocent", "inputSchema": {"type": "object"}},
]
PROMPTS = [{"name": "greet", "description": f"greets {SPLIT}"}, {"name": NAMED}]
RESOURCES = [{"uri": "split://doc", "name": "doc", "description": f"holds {SPLIT}"}]


def answer(rid: object, result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None or method is None:
            continue
        if method == "initialize":
            caps = {"tools": {}, "prompts": {}, "resources": {}}
            info = {"name": "splitting", "version": "1"}
            greeting = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info}
            answer(rid, {**greeting, "instructions": f"use {SPLIT}"})
        elif method == "tools/list":
            answer(rid, {"tools": TOOLS})
        elif method == "prompts/list":
            answer(rid, {"prompts": PROMPTS})
        elif method == "resources/list":
            answer(rid, {"resources": RESOURCES})
        elif method == "resources/templates/list":
            answer(rid, {"resourceTemplates": []})
        elif method == "ping":
            answer(rid, {})
        else:
            error = {"code": -32601, "message": f"no {method}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
