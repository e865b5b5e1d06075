"""What ``mcpd serve`` loads is what its config uses: a daemon with only stdio servers
and no HTTP endpoint imports neither the OAuth client, nor the HTTP transports, nor
the agent side's HTTP code, nor h11. Every module is memory the daemon keeps for as
long as it runs, and start-up time for each of its restarts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# The child runs `mcpd serve` as the console script does; once an agent has listed the
# tools it prints the modules loaded (and, with --http, the status line of an HTTP request
# on the socket) and stops the daemon as systemd would.
CHILD = """
import json, os, signal, socket, sys, threading, time
from mcpd.cli.client import Client, DaemonUnreachable
from mcpd.cli.main import main

def watch(path):
    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(path) as client:
                tools = [t["name"] for t in client.list_tools()]
            break
        except DaemonUnreachable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    modules = sorted(sys.modules)
    status = None
    if sys.argv[3:] == ["--http"]:  # then HTTP on the agent socket, as curl asks it
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: mcpd\\r\\nConnection: close\\r\\n\\r\\n")
            status = s.makefile("rb").readline().decode().strip()
    print(json.dumps({"tools": tools, "modules": modules, "status": status}), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, args=(sys.argv[2],), daemon=True).start()
main(["serve", "--config", sys.argv[1], "--log", "stderr"])
"""

# Loaded by the first HTTP server, HTTP request, login, JSON config or search.
NOT_FOR_STDIO = (
    "h11",
    "protocol.oauth",
    "protocol.http.parts",
    "transports.http",
    "transports.sse",
    "mcpd.servers.oauth.auth",
    "mcpd.servers.oauth.state",
    "mcpd.servers.oauth.login",
    "mcpd.local.state.oauth_store",
    "mcpd.agents.http.http_side",
    "mcpd.agents.http.mcp_route",
    "mcpd.agents.http.tcp",
    "mcpd.config.importing.convert",
    "mcpd.registry.profiles.search",
)


def serve_and_list(tmp_path: Path, servers: str, daemon: str = "", *flags: str) -> dict[str, Any]:
    cfg = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    cfg.write_text(f'[daemon]\nsocket = "{sock}"\n{daemon}\n{servers}')
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(cfg), str(sock), *flags],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    seen: dict[str, Any] = json.loads(out.stdout)
    return seen


def test_a_stdio_only_daemon_loads_no_http_or_oauth_code(tmp_path: Path) -> None:
    seen = serve_and_list(
        tmp_path,
        f'[servers.notes]\ncommand = "{sys.executable}"\nargs = ["-m", "mcpd.demo.notes"]\n',
    )
    assert "mcp__notes__search" in seen["tools"]
    loaded = [
        m
        for m in seen["modules"]
        for banned in NOT_FOR_STDIO
        if m == banned or m.startswith(banned + ".")
    ]
    assert not loaded, f"a stdio-only daemon loaded {loaded}"
    # The check must see the daemon's own modules, or it would pass on anything.
    assert {"mcpd.daemon", "transports.stdio.transport", "mcpd.servers.life.runner"} <= set(
        seen["modules"]
    )


def test_http_still_works_when_asked_for(tmp_path: Path) -> None:
    seen = serve_and_list(
        tmp_path,
        f'[servers.notes]\ncommand = "{sys.executable}"\nargs = ["-m", "mcpd.demo.notes"]\n',
        'http_listen = "127.0.0.1:0"\n',
        "--http",
    )
    assert "mcp__notes__search" in seen["tools"]
    # The endpoint listens from the start; the HTTP routes come with the first request.
    assert {"h11", "mcpd.agents.http.tcp"} <= set(seen["modules"])
    assert seen["status"] == "HTTP/1.1 200 OK"
