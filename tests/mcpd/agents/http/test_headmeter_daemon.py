"""The endpoint weighs a head as its bytes come, before any token is shown: small
headers past their bound are refused before the head ends, and what the heads still
coming hold beyond that bound is bounded for all connections together."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from mcpd.agents.http.headmeter import HEAD_ROOM
from mcpd.agents.http.headsize import MAX_HEAD
from mcpd.config.tables.model import Config
from tests.support.clients.agent import make_config, running

START = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _config(tmp_path: Path) -> Config:
    return make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))


async def _answer(stream: trio.SocketStream) -> bytes:
    got = b""
    try:
        while chunk := await stream.receive_some(65536):
            got += chunk
    except trio.BrokenResourceError:
        pass
    return got


async def test_small_headers_past_their_bound_are_refused_before_the_head_ends(
    tmp_path: Path,
) -> None:
    """Such a head was kept and parsed whole, up to the cookies' room (800 KiB of
    headers of three bytes), before its bound was applied: a few clients sending them
    slowed every request to the daemon, the user's own on its socket too."""
    with trio.fail_after(30):
        async with running(_config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            stream = await trio.open_tcp_stream("127.0.0.1", daemon.agent_server.endpoint.port)
            with trio.move_on_after(5):
                await stream.send_all(START + b"x:y\r\n" * (4 * MAX_HEAD // 5))
            with trio.fail_after(3):  # well within the wait for a head's end
                answer = await _answer(stream)
            await stream.aclose()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:300]
    message = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]
    assert "before their end" in message and f"at most {MAX_HEAD} bytes" in message, message


async def test_heads_still_coming_share_one_room_beyond_their_bound(tmp_path: Path) -> None:
    """Every connection not yet past the token could hold a cookie head of 800 KiB
    unended, 50 MiB on the 64 places, outside any budget."""
    # Nine heads take all but a little of the room, each as much beyond MAX_HEAD.
    value = HEAD_ROOM // 9 - 100 + MAX_HEAD - len(START) - len(b"Cookie: ")
    with trio.fail_after(60):
        async with running(_config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            held = []
            for _ in range(9):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(START + b"Cookie: " + b"c" * value)
                held.append(stream)
                await trio.testing.wait_all_tasks_blocked()
            assert daemon.agent_server.http.head_room.held > HEAD_ROOM - 1000
            # A head just over the bound finds no room; it is read whole, then refused.
            extra = await trio.open_tcp_stream("127.0.0.1", port)
            await extra.send_all(START + b"Cookie: " + b"c" * (MAX_HEAD + 1000))
            with trio.fail_after(3):
                refused = await _answer(extra)
            await extra.aclose()
            # One of them leaves: its room comes back for the next.
            await held.pop().aclose()
            await trio.testing.wait_all_tasks_blocked()
            again = await trio.open_tcp_stream("127.0.0.1", port)
            await again.send_all(START + b"Cookie: " + b"c" * value + b"\r\n\r\n")
            with trio.fail_after(3):
                served = await again.receive_some(65536)
            await again.aclose()
            for stream in held:
                await stream.aclose()
    assert refused.startswith(b"HTTP/1.1 503 "), refused[:300]
    message = json.loads(refused.partition(b"\r\n\r\n")[2])["error"]["message"]
    assert "the room for large heads is all taken; try again" in message, message
    assert served.startswith(b"HTTP/1.1 ") and not served.startswith(b"HTTP/1.1 503 "), served
