"""A legacy stdio MCP server that repeats a secret it should not have (``LEAK`` in its
environment, as if it had stolen it) everywhere a server's text goes: its
instructions, a tool's description, a call's result, a JSON-RPC error, a log message
and stderr. Plain stdlib, so it starts fast.

Tools: ``leak`` (the secret in the result, after a log message carrying it),
``fail`` (in the error's message and data), ``plain`` (a result without it, written
as ``PLAIN``), ``crash`` (it on stderr, then the process exits), ``ask`` (it in an
elicitation request to the calling agent first). Its name's title, its prompt and
resource, what they give and its completions carry it too.
"""

from __future__ import annotations

import json
import os
import sys

LEAK = os.environ.get("LEAK", "")
# Spaced as no encoder of mcpd's would write it: a reply spliced as it came keeps it.
PLAIN = b'{"content": [ {"type": "text",  "text": "nothing to see"} ],  "isError": false}'

TOOLS = [
    {"name": "leak", "description": f"repeats {LEAK}", "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "fails", "inputSchema": {"type": "object"}},
    {"name": "plain", "description": "says nothing", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "exits", "inputSchema": {"type": "object"}},
    {"name": "ask", "description": "asks first", "inputSchema": {"type": "object"}},
]
PROMPT = {"name": "greet", "description": f"greets {LEAK}", "arguments": [{"name": "who"}]}
RESOURCE = {"uri": "leak://key", "name": "key", "description": f"holds {LEAK}"}
# The call that waits for the agent's answer to the elicitation request.
waiting: list[object] = []


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text: str) -> None:
    params = {"level": "warning", "data": {"said": text}}
    write({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def call(rid: object, name: object) -> None:
    if name == "leak":
        log(f"calling with {LEAK}")
        result = {"content": [{"type": "text", "text": f"the key is {LEAK}"}], "isError": False}
        write({"jsonrpc": "2.0", "id": rid, "result": result})
    elif name == "fail":
        error = {"code": -32000, "message": f"refused {LEAK}", "data": {"key": LEAK}}
        write({"jsonrpc": "2.0", "id": rid, "error": error})
    elif name == "ask":
        waiting.append(rid)
        ask = {"message": f"confirm {LEAK}", "requestedSchema": {"type": "object"}}
        write({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": ask})
    elif name == "plain":
        sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": ')
        sys.stdout.write(PLAIN.decode() + "}\n")
        sys.stdout.flush()
    else:
        sys.stderr.write(f"fatal: bad key {LEAK}\n")
        sys.stderr.flush()
        sys.exit(3)


def main() -> None:
    sys.stderr.write(f"starting with {LEAK}\n")
    sys.stderr.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method is None and waiting:  # the agent's answer to the elicitation request
            result = {"content": [{"type": "text", "text": "answered"}], "isError": False}
            write({"jsonrpc": "2.0", "id": waiting.pop(), "result": result})
            continue
        if rid is None:
            if method == "notifications/initialized":
                log(f"ready with {LEAK}")
            continue
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "tools": {},
                    "logging": {},
                    "prompts": {},
                    "resources": {},
                    "completions": {},
                },
                "serverInfo": {"name": "leaky", "version": "1", "title": f"by {LEAK}"},
                "instructions": f"use {LEAK}",
            }
            write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            call(rid, params.get("name"))
        elif method == "prompts/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"prompts": [PROMPT]}})
        elif method == "prompts/get":
            text = {"type": "text", "text": f"hello {LEAK}"}
            messages = [{"role": "user", "content": text}]
            write({"jsonrpc": "2.0", "id": rid, "result": {"messages": messages}})
        elif method == "resources/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"resources": [RESOURCE]}})
        elif method == "resources/templates/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"resourceTemplates": []}})
        elif method == "resources/read":
            contents = [{"uri": params.get("uri"), "text": f"the key: {LEAK}"}]
            write({"jsonrpc": "2.0", "id": rid, "result": {"contents": contents}})
        elif method == "completion/complete":
            completion = {"values": [LEAK, "other"], "hasMore": False}
            write({"jsonrpc": "2.0", "id": rid, "result": {"completion": completion}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            error = {"code": -32601, "message": f"no {method}"}
            write({"jsonrpc": "2.0", "id": rid, "error": error})


if __name__ == "__main__":
    main()
