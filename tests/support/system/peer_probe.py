"""Probes run as another local user: requests on one connection to the agent socket, or
HTTP requests to it, each reply printed."""

from __future__ import annotations

# Sends requests (argv[2]: a JSON list of [method, params]) on one connection and prints
# each reply, one per line.
PEER_PROBE = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
buf = b""
for i, (method, params) in enumerate(json.loads(sys.argv[2])):
    req = {"jsonrpc": "2.0", "id": i, "method": method, "params": {**params, "_meta": meta}}
    try:
        s.sendall(json.dumps(req).encode() + bytes([10]))
    except OSError:
        pass
    while bytes([10]) not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    line, _, buf = buf.partition(bytes([10]))
    print(line.decode())
"""

# Sends HTTP requests to the socket (argv[2]: a JSON list of [method, target, headers,
# body]), each on a connection of its own, and prints each reply as a JSON list of its
# status and body, one per line.
PEER_HTTP = """
import json, socket, sys
for method, target, headers, body in json.loads(sys.argv[2]):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    data = body.encode()
    head = [method + " " + target + " HTTP/1.1", "Host: mcpd", "Connection: close",
            "Content-Length: " + str(len(data))]
    head += [k + ": " + v for k, v in headers.items()]
    s.sendall(("\\r\\n".join(head) + "\\r\\n\\r\\n").encode() + data)
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    status, _, rest = reply.partition(bytes([13, 10]))
    body = rest.partition(bytes([13, 10, 13, 10]))[2]
    print(json.dumps([int(status.split()[1]), body.decode()]))
"""
