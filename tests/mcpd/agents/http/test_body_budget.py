"""The bytes of request bodies the HTTP side holds at once: one bound for the agent
sockets and the endpoint together, and a share of it for each user, through a running
daemon."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from mcpd.agents.http.body_budget import BODY_BUDGET, LISTEN_BODY, body_limits
from mcpd.agents.http.body_size import MAX_BODY
from mcpd.config.tables.model import DaemonConfig
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import (
    MCP,
    answer_head,
    auth,
    header_dict,
    hold_listen,
    http,
    listen_request,
    modern,
    modern_headers,
)
from tests.support.system.peer_user import needs_root, peer_uid, start_as

# Opens argv[3] connections to 127.0.0.1:argv[1], each sending the head in argv[2] (its
# bytes, latin-1) and none of the body it announces, and prints the status line and
# the end of the first answer that comes on any of them; then holds the others.
HOLD_BODIES = """
import select, socket, sys
held = []
for _ in range(int(sys.argv[3])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(sys.argv[2].encode("latin-1"))
    held.append(s)
ready, _, _ = select.select(held, [], [])
got = b""
try:
    while chunk := ready[0].recv(65536):  # to its end: the daemon hangs up
        got += chunk
except ConnectionResetError:  # where it left the body unread
    pass
print(got.split(bytes([13, 10]))[0].decode(), " ".join(got[-400:].decode().split()))
sys.stdout.flush()
sys.stdin.read()
"""


def config(tmp_path: Path) -> Any:
    return make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))


def body_head(port: int, token: str) -> bytes:
    """A POST /mcp head on the endpoint or the socket, announcing the largest body."""
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        *(f"{k}: {v}" for k, v in MCP.items()),
        f"Content-Length: {MAX_BODY}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def ping(port: int, token: str) -> Any:
    headers = {**MCP, **auth(token), **header_dict(modern_headers("ping"))}
    return await http(port, "POST", "/mcp", headers, json.dumps(modern(1, "ping")).encode())


async def first_answer(streams: list[trio.SocketStream]) -> tuple[int, bytes]:
    """Which of ``streams`` an answer came on first, and the head of it."""
    got: list[tuple[int, bytes]] = []
    async with trio.open_nursery() as nursery:

        async def wait(i: int) -> None:
            got.append((i, await answer_head(streams[i])))
            nursery.cancel_scope.cancel()

        for i in range(len(streams)):
            nursery.start_soon(wait, i)
    return got[0]


async def test_bodies_on_the_socket_and_the_endpoint_share_one_bound(tmp_path: Path) -> None:
    """Connections that each sent a head and held most of their body made the daemon
    hold all of it, on every connection a user had, however many: hundreds of MiB. Past
    the bound the next body is refused at its head, with the reason, and room comes
    back as soon as a held one goes."""
    limits = body_limits(DaemonConfig())
    fit = (limits.most + limits.reserve) // MAX_BODY  # the daemon's own user, as here
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon, AsyncExitStack() as held:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            streams: list[trio.SocketStream] = []
            for i in range(fit + 1):
                if i % 2:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                else:
                    stream = await trio.open_unix_socket(daemon.socket_path)
                held.push_async_callback(stream.aclose)
                await stream.send_all(body_head(port, token))
                streams.append(stream)
            refusing, refused = await first_answer(streams)
            assert refused.startswith(b"HTTP/1.1 503 "), refused[:300]
            assert b"\r\nretry-after: 1\r\n" in refused.lower(), refused[:300]
            try:  # the rest of the answer, until the daemon hangs up
                while chunk := await streams[refusing].receive_some(65536):
                    refused += chunk
            except trio.BrokenResourceError:  # a reset: it left the body unread
                pass
            reason = json.loads(refused.partition(b"\r\n\r\n")[2])["error"]
            assert f"would pass the {BODY_BUDGET} all may hold" in reason, reason
            full = await ping(port, token)
            assert full.status == 503, full.body[:200]
            await streams[(refusing + 1) % len(streams)].aclose()  # one held
            await trio.testing.wait_all_tasks_blocked(cushion=0.2)
            room = await ping(port, token)
            assert room.status == 200, room.body[:200]


@needs_root
async def test_one_user_holds_a_share_of_the_bodies(tmp_path: Path) -> None:
    """Another local user with the token could hold a full body on every connection it
    had; past its share it is refused, and the daemon's own user still gets in."""
    uid = peer_uid()
    share = body_limits(DaemonConfig()).per_uid // MAX_BODY
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            head = body_head(port, token).decode("latin-1")
            proc = await start_as(uid, HOLD_BODIES, str(port), head, str(share + 1))
            try:
                assert proc.stdout is not None
                said = b""
                while b"\n" not in said:
                    chunk = await proc.stdout.receive_some()
                    assert chunk, said
                    said += chunk
                assert said.startswith(b"HTTP/1.1 503 "), said
                assert f"uid {uid} has request bodies of".encode() in said, said
                ok = await ping(port, token)
                assert ok.status == 200, ok.body[:200]
            finally:
                proc.kill()
                await proc.wait()


async def test_a_request_answered_with_a_stream_holds_no_large_body(tmp_path: Path) -> None:
    """A GET stream or a listen runs until its client goes, and its body with it: 17
    GETs each sent with a whole body held every byte of the bound for as long as they
    stayed, and every other body was refused. A body on a GET, HEAD or DELETE is
    refused at its head, and a listen's is kept to what a listen is written in."""
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for method, path in [("GET", "/mcp"), ("GET", "/page/events"), ("DELETE", "/mcp")]:
                lines = [
                    f"{method} {path} HTTP/1.1",
                    f"Host: 127.0.0.1:{port}",
                    f"Authorization: Bearer {token}",
                    "Accept: text/event-stream",
                    f"Content-Length: {MAX_BODY}",
                ]
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
                    got = await answer_head(stream)
                assert got.startswith(b"HTTP/1.1 413 "), (method, path, got[:300])
            padded = listen_request(port, token)
            head, _, body = padded.partition(b"\r\n\r\n")
            body += b" " * LISTEN_BODY
            head = head.replace(
                f"Content-Length: {len(body) - LISTEN_BODY}".encode(),
                f"Content-Length: {len(body)}".encode(),
            )
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(head + b"\r\n\r\n" + body)
                refused = await answer_head(stream)
            assert refused.startswith(b"HTTP/1.1 413 "), refused[:300]
            await trio.testing.wait_all_tasks_blocked(cushion=0.2)  # its request ended
            assert daemon.agent_server.http.bodies.total == 0
            stream, listening = await hold_listen(port, token)  # an honest listen is served
            async with stream:
                assert listening.startswith(b"HTTP/1.1 200 "), listening[:300]
