"""An agent in a process of its own that makes many tools/call requests on mcpd's socket,
a window of them in flight at a time, and prints what each came to.

usage: python call_burst.py SOCKET PROFILE ERA CALLS_JSON
CALLS_JSON is a list of [tool name, arguments]; ERA is modern or legacy. Prints one
JSON object: {"pid": ..., "results": [{"is_error": bool, "error": bool}, ...]} in the
order of the calls.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

WINDOW = 25
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Line:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(60)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        while True:
            line = self.reader.readline()
            if not line:
                raise SystemExit("mcpd closed the connection")
            message: dict[str, Any] = json.loads(line)
            if "id" in message:
                return message


def main() -> None:
    path, profile, era, calls_json = sys.argv[1:5]
    calls = json.loads(calls_json)
    line = Line(path)
    modern = era == "modern"
    if not modern:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "burst", "version": "0"},
        }
        line.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": hello})
        reply = line.receive()
        assert "result" in reply, reply
        line.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    if profile != "default":
        params: dict[str, Any] = {"profile": profile}
        if modern:
            params["_meta"] = META
        line.send({"jsonrpc": "2.0", "id": "use", "method": "mcpd/useProfile", "params": params})
        reply = line.receive()
        assert "result" in reply, reply
    replies: dict[int, dict[str, Any]] = {}
    for start in range(0, len(calls), WINDOW):
        window = range(start, min(start + WINDOW, len(calls)))
        for i in window:
            name, arguments = calls[i]
            params = {"name": name, "arguments": arguments}
            if modern:
                params["_meta"] = META
            line.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        for _ in window:
            reply = line.receive()
            replies[reply["id"]] = reply
    results = []
    for i in range(len(calls)):
        reply = replies[i]
        result = reply.get("result") or {}
        results.append({"error": "error" in reply, "is_error": bool(result.get("isError"))})
    print(json.dumps({"pid": os.getpid(), "results": results}))


main()
