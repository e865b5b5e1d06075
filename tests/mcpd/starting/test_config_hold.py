"""``ConfigHold`` on a socket of its own, in this process: every agent is told the
config error and what to do, an HTTP client gets a 503 saying it, a reload by the
owner that still fails says the new error, and one that loads hands the config on
and answers once the daemon serves it; connections are held to the agent sockets'
limits (so many, each let go if it asks nothing in time, or sends too long a line).
Through systemd: ``test_serve_systemd``."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from mcpd.agents.entry.places import OWNER_RESERVE
from mcpd.config.loading.load import load
from mcpd.config.tables.model import CONFIG_ERROR, Config, ConfigError, DaemonConfig
from mcpd.local.service.systemd import Notifier
from mcpd.reloading.outcome import ReloadReport
from mcpd.starting import config_hold
from mcpd.starting.config_hold import ConfigHold

ERROR = ConfigError("servers.notes.command", "is empty")


class Recorder(Notifier):
    """What would have gone to systemd."""

    def __init__(self) -> None:
        super().__init__(None)
        self.sent: list[tuple[str, ...]] = []

    def notify(self, *assignments: str, wait: bool = True) -> bool:
        self.sent.append(assignments)
        return True


class Loads:
    """The config loader: the errors it raises in turn, then a config."""

    def __init__(self, *errors: ConfigError) -> None:
        self.errors = list(errors)
        self.calls: list[str] = []
        self.config = Config(source="loaded")

    def __call__(self, path: str) -> Config:
        self.calls.append(path)
        if self.errors:
            raise self.errors.pop(0)
        return self.config


async def listener_at(path: Path) -> trio.SocketListener:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(16)
    return trio.SocketListener(sock)


@asynccontextmanager
async def holding(
    tmp_path: Path,
    load: Loads,
    notifier: Notifier | None = None,
    limits: DaemonConfig | None = None,
    error: ConfigError = ERROR,
) -> AsyncIterator[tuple[ConfigHold, Path, trio.Nursery]]:
    path = tmp_path / "mcpd.sock"
    listener = await listener_at(path)
    hold = ConfigHold("/etc/mcpd/config.toml", error, load, notifier or Recorder(), limits)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold.run, listener)
            yield hold, path, nursery
            nursery.cancel_scope.cancel()
    await listener.aclose()


async def connect(path: Path) -> trio.SocketStream:
    return await trio.open_unix_socket(str(path))


async def exchange(stream: trio.SocketStream, line: bytes) -> dict[str, Any]:
    await stream.send_all(line + b"\n")
    buf = b""
    while b"\n" not in buf:
        chunk = await stream.receive_some(65536)
        assert chunk, "the hold hung up"
        buf += chunk
    reply: dict[str, Any] = json.loads(buf.partition(b"\n")[0])
    return reply


def request(method: str, rid: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}).encode()


async def test_every_request_is_told_the_error_and_what_to_do(tmp_path: Path) -> None:
    load = Loads()
    async with holding(tmp_path, load) as (_, path, _):
        stream = await connect(path)
        for rid, method in enumerate(("tools/list", "tools/call", "mcpd/status"), 1):
            reply = await exchange(stream, request(method, rid))
            assert reply["id"] == rid
            error = reply["error"]
            assert error["code"] == -32000
            assert error["message"].startswith(
                "mcpd is not serving: its config /etc/mcpd/config.toml has an error: "
                "servers.notes.command: is empty. Fix the file, then reload mcpd"
            )
            assert error["data"] == {CONFIG_ERROR: "servers.notes.command: is empty"}
        await stream.aclose()
    assert load.calls == []


async def test_notifications_get_nothing_and_garbage_a_parse_error(tmp_path: Path) -> None:
    async with holding(tmp_path, Loads()) as (_, path, _):
        stream = await connect(path)
        note = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'
        await stream.send_all(note + b"\n")
        garbage = await exchange(stream, b"{not json")
        assert garbage["error"]["code"] == -32700
        # The one after still gets its answer: the notification had none.
        assert (await exchange(stream, request("tools/list", 7)))["id"] == 7
        await stream.aclose()


async def test_an_oversized_line_ends_that_connection_alone(tmp_path: Path) -> None:
    async with holding(tmp_path, Loads()) as (_, path, _):
        flood = await connect(path)
        other = await connect(path)
        with pytest.raises(trio.BrokenResourceError):
            while True:  # the hold hangs up once the line is past its limit
                await flood.send_all(b"x" * 65536)
        assert "error" in await exchange(other, request("tools/list"))
        await flood.aclose()
        await other.aclose()


async def lines_until_closed(stream: trio.SocketStream) -> list[dict[str, Any]]:
    """What the hold writes on ``stream`` until it closes it."""
    received = b""
    while chunk := await stream.receive_some(65536):
        received += chunk
    return [json.loads(line) for line in received.splitlines()]


async def test_connections_past_the_limit_are_refused_saying_so(tmp_path: Path) -> None:
    limits = DaemonConfig(max_connections=2)
    async with holding(tmp_path, Loads(), limits=limits) as (_, path, _):
        # The test runs as the owner: it has the places kept for the owner too.
        idle = [await connect(path) for _ in range(2 + OWNER_RESERVE)]
        await trio.testing.wait_all_tasks_blocked()
        one_more = await connect(path)
        [refused] = await lines_until_closed(one_more)
        assert refused["error"]["message"] == (
            f"mcpd: too many connections (limit 2, and the {OWNER_RESERVE} kept for mcpd's "
            "own user and root are taken too)"
        )
        # One gone, its place is free again.
        await idle.pop().aclose()
        await trio.testing.wait_all_tasks_blocked()
        again = await connect(path)
        assert (
            "mcpd is not serving"
            in (await exchange(again, request("tools/list")))["error"]["message"]
        )
        for stream in [*idle, one_more, again]:
            await stream.aclose()


async def test_a_connection_that_asks_nothing_in_time_is_let_go_and_one_that_asked_stays(
    tmp_path: Path,
) -> None:
    limits = DaemonConfig(first_message_timeout=0.2)
    async with holding(tmp_path, Loads(), limits=limits) as (_, path, _):
        asked = await connect(path)
        await exchange(asked, request("tools/list"))
        silent = await connect(path)
        only_notes = await connect(path)
        await only_notes.send_all(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for stream, what in ((silent, "nothing"), (only_notes, "no request")):
            [closing] = await lines_until_closed(stream)
            assert closing["error"]["message"] == (
                f"mcpd: closing this connection: it sent {what} within 0.2 s of "
                "connecting (daemon.first_message_timeout)"
            )
        # Long past the deadline, the one that asked is still answered.
        assert (await exchange(asked, request("tools/list", 2)))["id"] == 2
        for stream in (asked, silent, only_notes):
            await stream.aclose()


async def test_a_peer_that_hangs_up_before_its_answer_ends_its_connection_alone(
    tmp_path: Path,
) -> None:
    async with holding(tmp_path, Loads()) as (_, path, _):
        for _ in range(3):
            gone = await connect(path)
            await gone.send_all(request("tools/list") * 2000 + b"\n")
            # Reset, with the answers unread: writing them fails.
            gone.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            await gone.aclose()
        other = await connect(path)
        assert "error" in await exchange(other, request("tools/list"))
        await other.aclose()


async def http_reply(path: Path) -> tuple[bytes, bytes]:
    """The head and body the hold answers an HTTP request on ``path`` with."""
    stream = await connect(path)
    await stream.send_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
    # The whole answer, however the connection ends after it (the hold does not
    # read the request, so the kernel may end it with a reset).
    received = b""
    with contextlib.suppress(trio.BrokenResourceError):
        while chunk := await stream.receive_some(65536):
            received += chunk
    await stream.aclose()
    head, _, body = received.partition(b"\r\n\r\n")
    return head, body


async def test_an_http_client_gets_a_503_that_says_why(tmp_path: Path) -> None:
    async with holding(tmp_path, Loads()) as (_, path, _):
        head, body = await http_reply(path)
        assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert f"Content-Length: {len(body)}".encode() in head
        assert body.decode().startswith("mcpd is not serving: its config /etc/mcpd/config.toml")


# A password with a "/" in it makes the URL one the parser cannot read.
PASSWORD = "hunter2/Zq9-SECRET"


@pytest.mark.parametrize(
    ("url", "env"),
    [
        ("http://user:${TPASS}@127.0.0.1:9/mcp", {"TPASS": PASSWORD}),
        (f"http://user:{PASSWORD}@127.0.0.1:9/mcp", {}),
        ("http://user:hunter2#Zq9-SECRET@127.0.0.1:9/mcp", {}),
        ("http://user:hunter2?Zq9-SECRET@127.0.0.1:9/mcp", {}),
        # Longer than a quote: the part a quote keeps is no part of it either.
        ("https://mcp.example.com:99999/${TPASS}", {"TPASS": "Zq9-SECRET" * 40}),
    ],
)
async def test_a_password_in_a_server_url_reaches_no_peer_of_the_hold(
    tmp_path: Path, url: str, env: dict[str, str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[servers.tickets]\nurl = "{url}"\n')
    with pytest.raises(ConfigError) as caught:
        load(config, env=env)
    async with holding(tmp_path, Loads(), error=caught.value) as (_, path, _):
        stream = await connect(path)
        reply = await exchange(stream, request("tools/list"))
        await stream.aclose()
        _, body = await http_reply(path)
    said = json.dumps(reply) + body.decode()
    assert "servers.tickets.url: invalid URL" in reply["error"]["data"][CONFIG_ERROR]
    assert "servers.tickets.url: invalid URL" in body.decode()
    for part in ("user", "hunter2", "Zq9", "SECRET"):
        assert part not in said


async def test_a_reload_that_still_fails_says_the_new_error_from_then_on(tmp_path: Path) -> None:
    second = ConfigError("servers.notes.url", "must be an http:// or https:// URL")
    notifier = Recorder()
    load = Loads(second)
    async with holding(tmp_path, load, notifier) as (_, path, _):
        stream = await connect(path)
        reply = await exchange(stream, request("mcpd/reload"))
        assert reply["error"]["message"] == f"config rejected: {second}"
        assert reply["error"]["data"] == {CONFIG_ERROR: str(second)}
        later = await exchange(stream, request("tools/list", 2))
        assert str(second) in later["error"]["message"]
        await stream.aclose()
    assert load.calls == ["/etc/mcpd/config.toml"]
    # systemd shows STATUS= to every local user: neither error's key nor words.
    status = "STATUS=config error (mcpd status and the journal say what)"
    assert notifier.sent[0] == ("READY=1", status)
    assert notifier.sent[1][0] == "RELOADING=1"
    assert notifier.sent[2] == ("READY=1", status)


async def test_only_the_owner_may_reload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_hold, "is_owner", lambda peer: False)
    load = Loads()
    async with holding(tmp_path, load) as (_, path, _):
        stream = await connect(path)
        reply = await exchange(stream, request("mcpd/reload"))
        assert reply["error"]["message"].startswith("mcpd is not serving")
        await stream.aclose()
    assert load.calls == []


async def test_a_reload_that_loads_hands_the_config_on_and_answers_when_it_is_served(
    tmp_path: Path,
) -> None:
    load = Loads()
    path = tmp_path / "mcpd.sock"
    listener = await listener_at(path)
    hold = ConfigHold("/etc/mcpd/config.toml", ERROR, load, Recorder())
    replies: list[dict[str, Any]] = []

    async def reloads() -> None:
        stream = await connect(path)
        replies.append(await exchange(stream, request("mcpd/reload", 9)))
        await stream.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reloads)
            config = await nursery.start(hold.run, listener)
            assert config is load.config
            await trio.testing.wait_all_tasks_blocked()
            # Loaded: the reload's answer waits for the daemon to serve it.
            assert replies == []
            hold.handed_on(ReloadReport(added=["notes"], removed=[], changed=[], unchanged=[]))
    result = msgspec.to_builtins(
        ReloadReport(added=["notes"], removed=[], changed=[], unchanged=[])
    )
    assert replies == [{"jsonrpc": "2.0", "id": 9, "result": result}]
    # The listening socket is the daemon's now: still open, still accepting.
    stream = await connect(path)
    accepted = await listener.accept()
    await stream.aclose()
    await accepted.aclose()
    await listener.aclose()


async def test_failed_reloads_are_answered_and_the_first_that_loads_waits_for_the_daemon(
    tmp_path: Path,
) -> None:
    """``run`` reports a config only when a reload found one that loads; until then it
    answers on, however many reloads fail."""
    load = Loads(ERROR, ERROR)
    path = tmp_path / "mcpd.sock"
    listener = await listener_at(path)
    hold = ConfigHold("/etc/mcpd/config.toml", ERROR, load, Recorder())
    replies: list[dict[str, Any]] = []

    async def reloads() -> None:
        stream = await connect(path)
        for rid in (1, 2, 3):
            replies.append(await exchange(stream, request("mcpd/reload", rid)))
        await stream.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reloads)
            await nursery.start(hold.run, listener)
            await trio.testing.wait_all_tasks_blocked()
            assert [r["error"]["data"] for r in replies] == [{CONFIG_ERROR: str(ERROR)}] * 2
            hold.handed_on(ReloadReport(added=[], removed=[], changed=[], unchanged=[]))
    assert replies[2]["result"]["added"] == []
    assert load.calls == ["/etc/mcpd/config.toml"] * 3
    await listener.aclose()
