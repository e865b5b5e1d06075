"""Capture what the real servers list, for ``tests/mcpd/registry/findings/test_rules.py``.

    python tests/support/hosts/capture_peer_listings.py > tests/support/data/peer_listings.json

Each server is started on stdio, greeted in the handshake era (every peer speaks it)
and asked for every page of its tools, prompts and resource templates; its
instructions come from the greeting. Run it again after ``make peers`` installs new
versions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
NODE_BIN = ROOT / "tests" / "peers" / "node_modules" / ".bin"
V1 = ROOT / ".venv-peers-v1" / "bin" / "python"
SERVERS = ROOT / "tests" / "interop" / "servers"
LISTS = (("tools/list", "tools"), ("prompts/list", "prompts"))
TEMPLATES = ("resources/templates/list", "resourceTemplates")


def commands(folder: str) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "everything": [str(NODE_BIN / "mcp-server-everything"), "stdio"],
        "filesystem": [str(NODE_BIN / "mcp-server-filesystem"), folder],
        "memory": [str(NODE_BIN / "mcp-server-memory")],
        "time": [str(Path(py).with_name("mcp-server-time"))],
        "sdk": [py, str(SERVERS / "sdk_server.py"), "stdio", "--ask", "--grow"],
        "sdk1": [str(V1), str(SERVERS / "sdk1_server.py"), "stdio"],
        "sdk1_sse": [str(V1), str(SERVERS / "sdk1_sse_server.py"), "stdio"],
        "folder": [py, str(SERVERS / "folder_server.py"), folder, "stdio"],
        "asking": [py, str(SERVERS / "asking_server.py"), "stdio"],
        "conformance": [py, str(SERVERS / "conformance_server.py"), "stdio"],
    }


class Peer:
    def __init__(self, argv: list[str], cwd: str) -> None:
        env = dict(os.environ, PATH=f"{NODE_BIN}:{os.environ.get('PATH', '')}")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its output during {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply  # type: ignore[no-any-return]

    def every_page(self, method: str, key: str) -> list[Any] | None:
        items: list[Any] = []
        cursor = None
        while True:
            reply = self.request(method, {"cursor": cursor} if cursor else {})
            if "result" not in reply:
                return None
            items += reply["result"].get(key) or []
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                return items

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def capture(argv: list[str], folder: str) -> dict[str, Any]:
    peer = Peer(argv, folder)
    try:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "capture", "version": "0"},
        }
        greeting = peer.request("initialize", hello)["result"]
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        caps = greeting.get("capabilities") or {}
        out: dict[str, Any] = {"instructions": greeting.get("instructions")}
        wanted = [pair for pair in LISTS if pair[1] in caps]
        if "resources" in caps:
            wanted.append(TEMPLATES)
        for method, key in wanted:
            out[key] = peer.every_page(method, key)
        return out
    finally:
        peer.close()


def main() -> None:
    folder = tempfile.mkdtemp()
    listings = {name: capture(argv, folder) for name, argv in commands(folder).items()}
    json.dump(listings, sys.stdout, indent=1, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
