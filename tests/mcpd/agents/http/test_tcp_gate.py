"""The TCP endpoint checks who is asking before it spends anything on them: the token
and the Origin are checked at the headers (no body of a stranger's is read), a
connection has a few seconds to send its headers, and strangers wait in a lobby of
their own, so no flood of them turns away a client that has the token.

A real ``mcpd serve`` in a process of its own, so that its memory and its descriptors
can be read from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import trio

from mcpd.agents.http.tcp import LOBBY_SIZE
from tests.support.clients.daemon_http import Reply, modern, modern_headers
from tests.support.system.procs import scripted

MCPD = [sys.executable, "-m", "mcpd"]
DECLARED = 4 * 1024 * 1024  # the most a body may be: what a stranger claims to send
STRANGERS = 20
SLOW_CLIENTS = 5
BEYOND_THE_LOBBY = 8


class Served(msgspec.Struct):
    pid: int
    port: int
    token: str


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, extra: str = "") -> AsyncIterator[Served]:
    """``mcpd serve`` with the endpoint on a free port, until the block ends."""
    command, args = scripted("--tools", "1")
    sock, state = tmp_path / "mcpd.sock", tmp_path / "state"
    config = tmp_path / "mcpd.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\nstate_dir = "{state}"\n'
        f'http_listen = "127.0.0.1:0"\n{extra}\n'
        f"[servers.s]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    proc = await trio.lowlevel.open_process(
        [*MCPD, "serve", "--config", str(config), "--log", "stderr"], stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    try:
        seen = b""
        while f"listening on {sock}".encode() not in seen:
            chunk = await proc.stderr.receive_some(1 << 16)
            assert chunk, f"mcpd serve exited before it was ready: {seen.decode()}"
            seen += chunk
        found = re.search(rb"HTTP endpoint on http://127\.0\.0\.1:(\d+)/mcp", seen)
        assert found is not None, seen.decode()
        printed = await trio.run_process(
            [*MCPD, "token", "--config", str(config)], capture_stdout=True
        )
        token = printed.stdout.decode().strip()
        async with trio.open_nursery() as nursery:
            # Its log is read on, or a daemon that logs much would stop on a full pipe.
            nursery.start_soon(_drain, proc.stderr)
            yield Served(proc.pid, int(found.group(1)), token)
            nursery.cancel_scope.cancel()
    finally:
        proc.terminate()
        with trio.move_on_after(20, shield=True):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(1 << 16):
        pass


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def request_head(method: str, path: str, headers: dict[str, str], length: int) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def read_to_end(stream: trio.SocketStream) -> bytes:
    """What the daemon sends until it closes the connection."""
    data = b""
    with contextlib.suppress(trio.BrokenResourceError):
        while chunk := await stream.receive_some(1 << 16):
            data += chunk
    return data


async def list_tools(port: int, token: str) -> Reply:
    body = json.dumps(modern(1, "tools/list")).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
        "Connection": "close",
        **dict(h.split(": ", 1) for h in modern_headers("tools/list")),
    }
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request_head("POST", "/mcp", headers, len(body)) + body)
        return Reply(await read_to_end(stream))


async def push_body(stream: trio.SocketStream, size: int) -> int:
    """Send up to ``size`` bytes of body, as long as the daemon takes them; how many went."""
    sent, piece = 0, b"x" * (256 * 1024)
    with contextlib.suppress(trio.BrokenResourceError):
        while sent < size:
            chunk = piece[: size - sent]
            await stream.send_all(chunk)
            sent += len(chunk)
    return sent


async def test_silent_connections_never_turn_away_a_client_with_the_token(
    tmp_path: Path,
) -> None:
    with trio.fail_after(90):
        async with serving(tmp_path) as daemon:
            assert (await list_tools(daemon.port, daemon.token)).status == 200
            before = descriptors(daemon.pid)
            silent = []
            try:
                for _ in range(300):
                    silent.append(await trio.open_tcp_stream("127.0.0.1", daemon.port))
                reply = await list_tools(daemon.port, daemon.token)
                assert reply.status == 200, reply.body
                assert [t["name"] for t in reply.json()["result"]["tools"]] == ["mcp__s__tool0"]
                # The daemon does not keep a descriptor for each of them either.
                assert descriptors(daemon.pid) - before < 100
            finally:
                for stream in silent:
                    await stream.aclose()


async def test_a_strangers_body_is_not_read(tmp_path: Path) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    with trio.fail_after(90):
        async with serving(tmp_path) as daemon:
            # Once, so that what the first HTTP request loads is in the baseline.
            warm = await trio.open_tcp_stream("127.0.0.1", daemon.port)
            async with warm:
                await warm.send_all(request_head("GET", "/healthz", {"Connection": "close"}, 0))
                assert Reply(await read_to_end(warm)).status == 401
            before = rss_kib(daemon.pid)
            streams = [
                await trio.open_tcp_stream("127.0.0.1", daemon.port) for _ in range(STRANGERS)
            ]
            try:
                sent = [0] * STRANGERS

                async def post(i: int) -> None:
                    await streams[i].send_all(request_head("POST", "/mcp", headers, DECLARED))
                    # All but the last byte, for as long as the daemon reads them.
                    sent[i] = await push_body(streams[i], DECLARED - 1)

                async with trio.open_nursery() as nursery:
                    for i in range(STRANGERS):
                        nursery.start_soon(post, i)
                grown_mib = (rss_kib(daemon.pid) - before) / 1024
                assert grown_mib < 20, f"the daemon grew by {grown_mib:.0f} MiB"
                for stream in streams:
                    refused = Reply(await read_to_end(stream))
                    assert refused.status == 401
                    assert refused.headers["www-authenticate"] == 'Bearer realm="mcpd"'
                    assert refused.headers["connection"] == "close"
                    assert "mcpd token" in refused.json()["error"]["message"]
                # Refused at the headers, long before the body could have come.
                assert all(n < DECLARED - 1 for n in sent), sent
            finally:
                for stream in streams:
                    await stream.aclose()
            # The token still opens the door.
            assert (await list_tools(daemon.port, daemon.token)).status == 200


async def test_a_foreign_origin_is_refused_before_the_body(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with serving(tmp_path) as daemon:
            headers = {
                "Content-Type": "application/json",
                "Authorization": f"Bearer {daemon.token}",
                "Origin": "http://evil.example",
            }
            stream = await trio.open_tcp_stream("127.0.0.1", daemon.port)
            async with stream:
                await stream.send_all(
                    request_head("POST", "/mcp", headers, DECLARED) + b'{"jsonrpc":'
                )
                answer = await read_to_end(stream)
            assert answer, "the daemon closed the connection without an answer"
            refused = Reply(answer)
            assert refused.status == 403
            assert "evil.example" in refused.json()["error"]["message"]


async def test_headers_must_come_soon(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with serving(tmp_path, "http_header_timeout = 0.5") as daemon:
            silent = await trio.open_tcp_stream("127.0.0.1", daemon.port)
            halfway = await trio.open_tcp_stream("127.0.0.1", daemon.port)
            async with silent, halfway:
                await halfway.send_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                # Both are let go without an answer: the daemon closes them.
                assert await read_to_end(silent) == b""
                assert await read_to_end(halfway) == b""
            assert (await list_tools(daemon.port, daemon.token)).status == 200


async def connect_from(address: str, port: int) -> trio.SocketStream:
    """A connection to the endpoint from another loopback address than 127.0.0.1."""
    sock = trio.socket.socket()
    try:
        await sock.bind((address, 0))
        await sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


async def test_a_flood_from_another_address_never_pushes_out_a_slow_client(
    tmp_path: Path,
) -> None:
    """Clients that connect, then send their headers only once more strangers than
    the lobby has places have connected after them from another address (as a client
    that waits 200 ms does under a flood of a few hundred connections a second), are
    all served."""
    with trio.fail_after(90):
        async with serving(tmp_path, "http_header_timeout = 60") as daemon:
            slow = [
                await trio.open_tcp_stream("127.0.0.1", daemon.port) for _ in range(SLOW_CLIENTS)
            ]
            flood = [
                await connect_from("127.0.0.2", daemon.port)
                for _ in range(LOBBY_SIZE + BEYOND_THE_LOBBY)
            ]
            # All of them waited in the lobby, so this many were pushed out of it.
            pushed_out, enough = 0, trio.Event()
            answers = [b""] * SLOW_CLIENTS

            async def watch(stream: trio.SocketStream, slot: int | None = None) -> None:
                nonlocal pushed_out
                data = await read_to_end(stream)
                if slot is not None:
                    answers[slot] = data
                if not data:
                    pushed_out += 1
                    if pushed_out == SLOW_CLIENTS + BEYOND_THE_LOBBY:
                        enough.set()

            try:
                async with trio.open_nursery() as watching:
                    for stream in flood:
                        watching.start_soon(watch, stream)
                    async with trio.open_nursery() as clients:
                        for i, stream in enumerate(slow):
                            clients.start_soon(watch, stream, i)
                        await enough.wait()
                        head = request_head(
                            "GET",
                            "/status",
                            {"Authorization": f"Bearer {daemon.token}", "Connection": "close"},
                            0,
                        )
                        for stream in slow:
                            with contextlib.suppress(trio.BrokenResourceError):
                                await stream.send_all(head)
                    watching.cancel_scope.cancel()
            finally:
                for stream in slow + flood:
                    await stream.aclose()
            outcomes = Counter(Reply(a).status if a else "pushed out" for a in answers)
            assert outcomes == {200: SLOW_CLIENTS}
