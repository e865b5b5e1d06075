"""Helpers for HTTP interop tests: run a server process, and watch what a client sends.

``serve`` starts a server in its own process group, keeps reading its output (so a
chatty server never blocks on a full pipe, and tests can wait for a log line), waits
until its port accepts connections, and kills the group at the end.

``wiretap`` is a TCP relay between a client and a server that passes every byte on
unchanged and records the HTTP requests going through it (method, target, headers,
body), and the raw bytes of the replies. It reads request bodies by
``Content-Length`` only, which is how mcpd sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import Any

import trio

START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, proc: trio.Process, port: int) -> None:
        self.proc = proc
        self.port = port
        self.output = b""
        self._grew = trio.Event()
        self.ended = trio.Event()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    async def _drain(self, stream: trio.abc.ReceiveStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await stream.receive_some(65536):
                self.output += data
                self._grew.set()
                self._grew = trio.Event()

    async def wait_output(self, text: str) -> None:
        """Wait until the server has written ``text`` (the caller bounds the wait)."""
        while text not in self.text:
            if self.ended.is_set():
                raise AssertionError(f"server ended without writing {text!r}:\n{self.text}")
            await self._grew.wait()

    def count(self, text: str) -> int:
        return self.text.count(text)

    async def _wait_accepting(self) -> None:
        with trio.fail_after(START_TIMEOUT):
            while True:
                if self.proc.returncode is not None:
                    raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.text}")
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", self.port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                return


@contextlib.asynccontextmanager
async def serve(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    full_env = {**os.environ, "COLUMNS": "500", **(env or {})}
    proc = await trio.lowlevel.open_process(
        list(argv),
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = ServerProcess(proc, port)
    try:
        async with trio.open_nursery() as nursery:
            assert proc.stdout is not None

            async def drain() -> None:
                assert proc.stdout is not None
                await server._drain(proc.stdout)
                server.ended.set()
                server._grew.set()

            nursery.start_soon(drain)
            try:
                await server._wait_accepting()
                yield server
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await proc.wait()


class TappedRequest:
    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.target = target
        self.headers = headers  # names lower-cased
        self.body = body

    @property
    def rpc(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def rpc_method(self) -> str | None:
        msg = self.rpc
        return msg.get("method") if isinstance(msg, dict) else None

    def __repr__(self) -> str:
        return f"<{self.method} {self.rpc_method or ''} {self.headers}>"


class WireTap:
    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.port = 0
        self.requests: list[TappedRequest] = []
        self.received: list[bytearray] = []  # what the server sent, per connection
        self._seen = trio.Event()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def rpc_methods(self) -> list[str | None]:
        """What each request was: the JSON-RPC method of a POST, else the HTTP method."""
        return [r.rpc_method if r.method == "POST" else r.method for r in self.requests]

    def server_sent(self, pattern: bytes) -> bool:
        """Whether ``pattern`` (a regular expression) matches on any connection."""
        return any(re.search(pattern, bytes(data), re.DOTALL) for data in self.received)

    async def wait_for(self, method: str) -> TappedRequest:
        """The first request with this HTTP or JSON-RPC method, once it went through."""
        while True:
            for req in self.requests:
                if method in (req.method, req.rpc_method):
                    return req
            await self._seen.wait()

    async def _relay(self, client: trio.SocketStream) -> None:
        server = await trio.open_tcp_stream("127.0.0.1", self.server_port)
        async with server, client, trio.open_nursery() as nursery:
            received = bytearray()
            self.received.append(received)

            async def back() -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    while data := await server.receive_some(65536):
                        received.extend(data)
                        await client.send_all(data)
                nursery.cancel_scope.cancel()

            nursery.start_soon(back)
            buf = b""
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while data := await client.receive_some(65536):
                    await server.send_all(data)
                    buf = self._parse(buf + data)
            nursery.cancel_scope.cancel()

    def _parse(self, buf: bytes) -> bytes:
        while (end := buf.find(b"\r\n\r\n")) >= 0:
            lines = buf[:end].decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            size = int(headers.get("content-length", "0"))
            if len(buf) < end + 4 + size:
                break
            body = buf[end + 4 : end + 4 + size]
            buf = buf[end + 4 + size :]
            self.requests.append(TappedRequest(method, target, headers, body))
            self._seen.set()
            self._seen = trio.Event()
        return buf


@contextlib.asynccontextmanager
async def wiretap(server_port: int) -> AsyncIterator[WireTap]:
    tap = WireTap(server_port)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, tap._relay, 0, host="127.0.0.1"))
        tap.port = listeners[0].socket.getsockname()[1]
        try:
            yield tap
        finally:
            nursery.cancel_scope.cancel()
