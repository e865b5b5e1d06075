"""The bench's HTTP pieces do what their rows claim: the echo server answers over HTTP
as over stdio (JSON or an event stream) and checks the routing headers, the load
generator reads both kinds of reply, and the HTTP relay carries every call there and
back. A floor that lost calls or answered without the server would make the figures
beside mcpd's say nothing."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bench import http_relay
from bench.echo_server import Codec, EchoCore
from bench.http_echo import Server, listen
from bench.httpload import HttpClient, HttpPump
from bench.wire import LineClient


@contextlib.contextmanager
def echo_server(sse: bool) -> Iterator[str]:
    listener, url = listen(0, None)
    core = EchoCore(Codec(False), 1, 100)
    thread = threading.Thread(target=Server(core, sse).run, args=(listener,), daemon=True)
    thread.start()
    yield url


@pytest.mark.parametrize("sse", [False, True], ids=["json", "event-stream"])
def test_the_load_generator_calls_the_http_echo_server(sse: bool) -> None:
    with echo_server(sse) as url:
        client = HttpClient(url)
        client.handshake(modern=True)
        assert client.list_tools() == ["echo"]
        pump = HttpPump(client, "echo", modern=True)
        outcome = pump.run(3, 100, None, 30)
    assert len(outcome["latencies"]) == 30
    assert outcome["errors"] == 0, outcome["first_error"]
    assert pump.checked == {100: "ok"}


def test_the_http_echo_server_refuses_a_call_whose_headers_do_not_match_its_body() -> None:
    with echo_server(False) as url:
        host, port = url.split("/")[2].split(":")
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "echo",
                    "arguments": {"text": "x"},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            }
        ).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: other\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(head.encode() + body)
            reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"Header mismatch: Mcp-Name" in reply


@pytest.mark.parametrize("sse", [False, True], ids=["json", "event-stream"])
def test_the_http_relay_carries_each_line_to_the_server_and_back(sse: bool, tmp_path: Path) -> None:
    sock = str(tmp_path / "relay.sock")
    replies: list[Any] = []

    async def main(url: str) -> None:
        with trio.fail_after(30):
            await relay(url)

    async def relay(url: str) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(http_relay.serve, sock, url, 4)
            client = await trio.to_thread.run_sync(LineClient.connect, sock)
            try:
                await trio.to_thread.run_sync(client.handshake)
                for i in range(5):
                    raw = await trio.to_thread.run_sync(
                        lambda i=i: client.request(
                            "tools/call", {"name": "echo", "arguments": {"text": f"t{i}"}}
                        )
                    )
                    replies.append(json.loads(bytes(raw)))
            finally:
                client.close()
            nursery.cancel_scope.cancel()

    with echo_server(sse) as url:
        trio.run(main, url)
    assert [r["content"][0]["text"] for r in replies] == [f"t{i}" for i in range(5)]
