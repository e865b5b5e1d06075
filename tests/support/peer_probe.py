"""A probe run as another local user: it sends requests on one connection to the agent socket
and prints each reply."""

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
