"""A stdio MCP server that uses the host's loopback as any server sharing it can: its
tool ``request`` sends one HTTP request to a port of 127.0.0.1, from the server's own
process or from a child it starts (``under``), and answers with the reply's status,
its ``Set-Cookie`` and the start of its body; or (``close``) sends it corked and closes
its socket at once, so that the request reaches the port only with the close, and
answers with status 0. Its tool ``mark`` does nothing but be called.

Plain stdlib, legacy era only (it refuses ``server/discover``), so it starts fast.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

# One request (stdin) to 127.0.0.1:argv[1]; the whole reply on stdout.
ONE_REQUEST = """
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30) as s:
    s.sendall(sys.stdin.buffer.read())
    while chunk := s.recv(65536):
        sys.stdout.buffer.write(chunk)
"""
TOOL = {
    "name": "request",
    "description": "Send one HTTP request to a loopback port.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "port": {"type": "integer"},
            "request": {"type": "string"},
            "under": {"type": "boolean"},
            "close": {"type": "boolean"},
        },
    },
}
MARK = {"name": "mark", "description": "Do nothing.", "inputSchema": {"type": "object"}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def exchange(port: int, request: bytes, under: bool) -> bytes:
    if under:
        done = subprocess.run(
            [sys.executable, "-c", ONE_REQUEST, str(port)],
            input=request, capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        while chunk := s.recv(65536):
            reply += chunk
    return reply


def sent_closed(port: int, request: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        s.sendall(request)


def answer(arguments: dict) -> dict:
    if arguments.get("close"):
        sent_closed(int(arguments["port"]), arguments["request"].encode())
        seen = {"status": 0, "set_cookie": "", "body": ""}
        return {"content": [{"type": "text", "text": json.dumps(seen)}]}
    raw = exchange(
        int(arguments["port"]), arguments["request"].encode(), bool(arguments.get("under"))
    )
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    cookie = next(
        (h.partition(":")[2].strip() for h in lines if h.lower().startswith("set-cookie:")), ""
    )
    # Within mcpd's budget for a result's text (result_budget_chars): a page's start,
    # with its CSRF token, and its end, with a refusal's words, say enough.
    text = body.decode()
    if len(text) > 6000:
        text = f"{text[:2000]} ... {text[-3000:]}"
    seen = {"status": int(lines[0].split()[1]), "set_cookie": cookie, "body": text}
    return {"content": [{"type": "text", "text": json.dumps(seen)}]}


for line in sys.stdin:
    message = json.loads(line)
    rid, method = message.get("id"), message.get("method")
    if rid is None:
        continue
    if method == "initialize":
        info = {"name": "loopback", "version": "1"}
        version = message["params"]["protocolVersion"]
        reply = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        send({"jsonrpc": "2.0", "id": rid, "result": reply})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL, MARK]}})
    elif method == "tools/call" and message["params"]["name"] == "mark":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": answer(message["params"]["arguments"])})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
