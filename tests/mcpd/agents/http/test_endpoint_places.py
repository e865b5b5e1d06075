"""The HTTP endpoint's places: the status page keeps its own, which agents cannot take,
and one user holds a share of the agents', as on the agent sockets."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import (
    MCP,
    answer_head,
    auth,
    hold_listen,
    http,
    listen_request,
    modern,
)
from tests.support.system.peer_user import needs_root, peer_uid, start_as
from tests.support.system.procs import scripted

# Opens argv[3] connections to 127.0.0.1:argv[1], each sending the listen in argv[2]
# (its bytes, latin-1), prints the status line of each answer (and a refusal's end),
# and holds them.
HOLD_LISTENS = """
import socket, sys
held = []
for _ in range(int(sys.argv[3])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(sys.argv[2].encode("latin-1"))
    got = s.recv(65536)
    while not got.startswith(b"HTTP/1.1 200 ") and (chunk := s.recv(65536)):
        got += chunk  # a refusal, to its end
    print(got.split(bytes([13, 10]))[0].decode(), " ".join(got[-300:].decode().split()))
    sys.stdout.flush()
    held.append(s)
sys.stdin.read()
"""


def config(tmp_path: Path, **daemon: Any) -> Any:
    command, args = scripted("--tools", "1")
    return make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        **daemon,
    )


async def test_an_agent_holding_every_place_leaves_the_page_its_own(tmp_path: Path) -> None:
    """A token holder's listens never end: 256 of them took every place, and a browser
    asking for the status page (where a person decides ``ask`` calls) got 503."""
    with trio.fail_after(60):
        async with running(config(tmp_path, max_connections=2)) as daemon, AsyncExitStack() as held:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            while True:  # every place the daemon's user may take, its reserve too
                stream, head = await hold_listen(port, token)
                held.push_async_callback(stream.aclose)
                if not head.startswith(b"HTTP/1.1 200 "):
                    break
            assert head.startswith(b"HTTP/1.1 503 "), head[:200]
            page = await http(port, "GET", "/", {"Host": f"127.0.0.1:{port}"})
            assert page.status != 503, page.body[:200]  # a browser without a session yet
            assert "mcpd dashboard" in page.body.decode(), page.body[:300]


async def test_a_connection_of_the_page_is_not_an_agents(tmp_path: Path) -> None:
    """Else an agent could ask for the page first, then hold one of its places."""
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            # An agent's request first, then one for the page on the same connection.
            await stream.send_all(
                f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {token}\r\n\r\n"
                f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            )
            first = await answer_head(stream)
            assert first.startswith(b"HTTP/1.1 200 "), first[:200]
            rest = b""
            while chunk := await stream.receive_some(65536):
                rest += chunk
            assert b"HTTP/1.1 400 " in rest and b"another connection" in rest, rest[:300]
            await stream.aclose()


async def test_a_page_request_behind_an_agents_says_once_that_the_connection_closes(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            body = json.dumps(modern(1, "ping")).encode()
            lines = [
                "POST /mcp HTTP/1.1",
                f"Host: 127.0.0.1:{port}",
                f"Authorization: Bearer {token}",
                *(f"{k}: {v}" for k, v in MCP.items()),
                "MCP-Protocol-Version: 2026-07-28",  # with no Mcp-Method: refused, 400
                f"Content-Length: {len(body)}",
            ]
            page = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body + page)
            got = b""
            while chunk := await stream.receive_some(65536):
                got += chunk
            await stream.aclose()
            first, _, refused = got.rpartition(b"HTTP/1.1 400 ")
            assert b"Mcp-Method" in first and b"another connection" in refused, got
            assert refused.lower().count(b"connection: close") == 1, refused


@needs_root
async def test_one_user_holds_a_share_of_the_agents_places(tmp_path: Path) -> None:
    """Another local user with the token took every place, and the daemon's user's
    agents got 503 until it let go."""
    uid = peer_uid()
    with trio.fail_after(60):
        async with running(config(tmp_path, max_connections=4)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            listen = listen_request(port, token).decode("latin-1")
            proc = await start_as(uid, HOLD_LISTENS, str(port), listen, "5")
            try:
                assert proc.stdout is not None
                said = b""
                while said.count(b"\n") < 5:
                    chunk = await proc.stdout.receive_some()
                    assert chunk, said
                    said += chunk
                lines = said.decode().splitlines()
                assert sum(line.startswith("HTTP/1.1 200 ") for line in lines) == 1, lines
                refused = [line for line in lines if line.startswith("HTTP/1.1 503 ")]
                assert len(refused) == 4, lines
                assert all(f"uid {uid} has 1 connections" in line for line in refused), lines
                ok = await http(port, "GET", "/healthz", auth(token))
                assert ok.status == 200, ok.body[:200]
            finally:
                proc.kill()
                await proc.wait()
