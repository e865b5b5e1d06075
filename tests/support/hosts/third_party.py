"""Real third-party agents and servers around a daemon: running them, and reading what
passed between them."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.hosts.peers import (
    NODE_BIN,
    ROOT,
    SERVERS,
    v1_python,
)
from tests.support.hosts.wiretap import ServerProcess, free_port, serve

HERE = Path(__file__).resolve().parents[2] / "interop"


def tapped(log: Path, command: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A server config whose stdin lines are also written to ``log``."""
    return {
        "command": sys.executable,
        "args": [str(HERE / "stdio_tap.py"), str(log), "--", command, *args],
        **extra,
    }


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


PEERS = ROOT / "tests" / "peers"


async def run_json(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = await trio.run_process(
        argv, capture_stdout=True, capture_stderr=True, check=False, env=env
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def node() -> str:
    found = NODE_BIN / "node"
    if found.exists():
        return str(found)
    system = shutil.which("node")
    if system is None:
        pytest.skip("node is not installed; run `make peers`")
    return system


def ts_probe(*args: str) -> list[str]:
    if not (PEERS / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("the TypeScript SDK is not installed; run `make peers`")
    return [node(), str(HERE / "ts_sdk_probe.mjs"), str(PEERS), *args]


DRIVER = HERE / "conformance_driver.py"


MODERN = "2026-07-28"


class Run:
    def __init__(self, returncode: int, out_dir: Path, log: str) -> None:
        self.returncode = returncode
        self.log = log
        # An "auth/x" scenario's results are one folder further down.
        found = sorted(out_dir.glob("**/checks.json"))
        assert len(found) == 1, f"no checks.json under {out_dir}:\n{log}"
        self.checks: list[dict[str, Any]] = json.loads(found[0].read_text())
        stdout = found[0].with_name("stdout.txt").read_text()
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        assert lines, f"the driver printed no summary:\n{stdout}\n{log}"
        self.summary: dict[str, Any] = json.loads(lines[-1])


def unexpected(checks: list[dict[str, Any]], expected: dict[str, str]) -> dict[str, str]:
    """Checks whose status differs from what is expected, and expected checks never seen."""
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for check in checks:
        if check["status"] == "INFO":
            continue
        full = f"{check['id']}/{check.get('name', '')}"
        key = full if full in expected else check["id"]
        seen.add(key)
        want = expected.get(key)
        if check["status"] != want:
            problems[full] = (
                f"{check['status']} (expected {want}): "
                f"{check.get('errorMessage') or check.get('description', '')}"
            )
    for key in expected.keys() - seen:
        problems[key] = "not reported"
    return problems


SSE_SERVER = str(SERVERS / "sdk1_sse_server.py")


def argv(peer: str, port: int) -> list[str]:
    python = v1_python()
    if peer == "sdk1":
        return [python, SSE_SERVER, "sse", str(port)]
    proxy = str(Path(python).with_name("mcp-proxy"))
    if not Path(proxy).exists():
        pytest.skip("mcp-proxy is missing from the v1 venv; run `make peers`")
    return [proxy, "--port", str(port), "--host", "127.0.0.1", "--", python, SSE_SERVER, "stdio"]


@contextlib.asynccontextmanager
async def peer_server(peer: str, port: int | None = None) -> AsyncIterator[ServerProcess]:
    port = port or free_port()
    async with serve(argv(peer, port), port) as server:
        yield server


class Relay:
    """A TCP relay to the server that can cut the connections it carries."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.port = 0
        self._scopes: list[trio.CancelScope] = []

    def url(self, path: str = "/sse") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def cut(self, index: int) -> None:
        """Drop the index-th connection (0: the first, which carries the stream)."""
        self._scopes[index].cancel()

    def cut_all(self) -> None:
        """Drop every connection carried so far."""
        for scope in self._scopes:
            scope.cancel()

    async def _relay(self, client: trio.SocketStream) -> None:
        scope = trio.CancelScope()
        self._scopes.append(scope)
        with scope:
            server = await trio.open_tcp_stream("127.0.0.1", self.server_port)
            async with server, client, trio.open_nursery() as nursery:
                nursery.start_soon(self._pipe, client, server, nursery.cancel_scope)
                await self._pipe(server, client, nursery.cancel_scope)

    @staticmethod
    async def _pipe(
        src: trio.SocketStream, dst: trio.SocketStream, scope: trio.CancelScope
    ) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await src.receive_some(65536):
                await dst.send_all(data)
        scope.cancel()


@contextlib.asynccontextmanager
async def relay(server_port: int) -> AsyncIterator[Relay]:
    r = Relay(server_port)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, r._relay, 0, host="127.0.0.1"))
        r.port = listeners[0].socket.getsockname()[1]
        try:
            yield r
        finally:
            nursery.cancel_scope.cancel()
