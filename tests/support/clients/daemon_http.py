"""HTTP to a running daemon, on its socket and on its TCP endpoint, as the tests speak it."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import trio

from tests.support.clients.agent import META

CURL = shutil.which("curl")


class Reply:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        """The messages of an event-stream body."""
        return [json.loads(m) for m in re.findall(rb"^data: (.*)$", self.body, re.M)]


async def curl(sock: str, path: str, *args: str) -> Reply:
    assert CURL is not None
    proc = await trio.run_process(
        [CURL, "-s", "-i", "--max-time", "20", "--unix-socket", sock, *args, f"http://mcpd{path}"],
        capture_stdout=True,
    )
    return Reply(proc.stdout)


def modern(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        "params": {**(params or {}), "_meta": META},
    }


def modern_headers(method: str, name: str | None = None) -> list[str]:
    out = ["MCP-Protocol-Version: 2026-07-28", f"Mcp-Method: {method}"]
    return [*out, f"Mcp-Name: {name}"] if name else out


MCP = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def http(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> Reply:
    """One request on its own connection; the whole answer (``Host`` is 127.0.0.1
    unless ``headers`` name another)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    headers = {"Host": "127.0.0.1", **(headers or {})}
    lines = [f"{method} {path} HTTP/1.1", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    await stream.aclose()
    return Reply(data)


def auth(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def header_dict(items: list[str]) -> dict[str, str]:
    return dict(h.split(": ", 1) for h in items)


async def socket_get(path: str, target: str) -> bytes:
    stream = await trio.open_unix_socket(path)
    await stream.send_all(f"GET {target} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") or target == "/healthz", head
    return body


MCP_HEADERS = [
    "-H",
    "Content-Type: application/json",
    "-H",
    "Accept: application/json, text/event-stream",
]


async def post(sock: str, body: dict[str, Any], *headers: str) -> Reply:
    extra = [a for h in headers for a in ("-H", h)]
    return await curl(sock, "/mcp", *MCP_HEADERS, *extra, "--data-binary", json.dumps(body))


async def stateless(
    sock: str, method: str, params: dict[str, Any], meta: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    """One 2026-07-28 request on a connection of its own (``name``: its Mcp-Name): the
    message that answers it, from a JSON body or the end of an event stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    reply = await post(sock, body, *modern_headers(method, name))
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        answer: dict[str, Any] = reply.events()[-1]
        return answer
    return reply.json()  # type: ignore[no-any-return]


def listen_request(port: int, token: str) -> bytes:
    """A 2026-07-28 ``subscriptions/listen`` for the endpoint at ``port``: its answer
    is an event stream that stays open until the client goes."""
    body = json.dumps(modern(1, "subscriptions/listen", {"notifications": {}})).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        *(f"{k}: {v}" for k, v in MCP.items()),
        *modern_headers("subscriptions/listen"),
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def answer_head(stream: trio.SocketStream) -> bytes:
    """What comes back on ``stream`` up to the end of an answer's head (less if it
    closes first)."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        got += chunk
    return got


async def hold_listen(port: int, token: str) -> tuple[trio.SocketStream, bytes]:
    """A connection to the endpoint holding a listen, and the head of its answer."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(listen_request(port, token))
    return stream, await answer_head(stream)
