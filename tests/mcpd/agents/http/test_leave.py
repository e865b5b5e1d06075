"""A reload that removes a profile, and the agents speaking HTTP on its own socket: as
for those speaking lines, the request each has in flight is answered (with its
result, or with why not once the grace is over), a subscription or an event stream
ends with its last word, a request sent after is refused with why, and only then does
each connection close."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.config.loading.load import load
from tests.support.clients.agent import META, running
from tests.support.clients.http_stream_client import (
    POST,
    Client,
    open_session,
    session_headers,
    stream_headers,
)
from tests.support.daemons.pins import Changing

LIMIT = 60
HOLD = "mcp__tickets__hold"
REFUSED = (
    "the profile 'dev' was removed by a reload: this connection closes once its requests "
    "in flight are answered"
)


def write_config(
    tmp_path: Path, server: Changing, sock: str | None, grace: float = LIMIT * 10
) -> Path:
    """One server, and the profile ``dev`` of it on its own socket ``sock`` (None: no
    such profile). The daemon's call_timeout is the grace a removed profile's agents get
    to be answered; the server's own keeps its calls waiting longer than that."""
    lines = [
        "[daemon]",
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}",
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}",
        "startup_deadline = 20.0",
        f"call_timeout = {grace}",
        "[servers.tickets]",
        f"call_timeout = {LIMIT * 10}.0",
        *(f"{key} = {json.dumps(value)}" for key, value in server.config().items()),
    ]
    if sock is not None:
        lines += ["[profiles.dev]", 'servers = ["tickets"]', f"socket = {json.dumps(sock)}"]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def modern(rid: int, method: str, name: str | None = None) -> tuple[dict[str, str], Any]:
    """The headers and body of a 2026-07-28 request."""
    headers = {**POST, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    params: dict[str, Any] = {"_meta": META}
    if name is not None:
        headers["mcp-name"] = name
        params |= {"name": name, "arguments": {}}
    return headers, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def call(rid: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": HOLD, "arguments": {}},
    }


async def answer(client: Client, method: str, headers: dict[str, str], body: Any) -> Any:
    """The status, the Connection header and the one message of the response."""
    status, head, data = await client.request(method, headers, body)
    if head.get("content-type") == "text/event-stream":
        events = [line[6:] for line in data.split(b"\n") if line.startswith(b"data: ")]
        data = events[-1]
    return status, head.get("connection"), json.loads(data)


async def closed(client: Client) -> None:
    """Until the daemon closes the connection, having sent nothing more."""
    assert await client.stream.receive_some(1 << 16) == b""


async def test_a_removed_profile_answers_the_http_call_in_flight_then_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, sock)
    with trio.fail_after(LIMIT), caplog.at_level(logging.INFO, "mcpd.agents"):
        async with (
            running(load(path), str(path)) as daemon,
            Client.open(daemon, unix=sock) as calling,
            Client.open(daemon, unix=sock) as idle,
            Client.open(daemon, unix=sock) as late,
        ):
            for client in (idle, late):  # each served a request, and kept open
                assert (await answer(client, "POST", *modern(1, "ping")))[0] == 200
            replies: list[Any] = []

            async def hold() -> None:
                replies.append(await answer(calling, "POST", *modern(2, "tools/call", HOLD)))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await server.tell("announce")  # read once the call waits at the server
                # The first line of a request, the rest of which comes after the reload.
                request = late.encode("POST", *modern(3, "tools/list"))
                cut = request.index(b"\r\n") + 2
                await late.stream.send_all(request[:cut])
                write_config(tmp_path, server, None)
                await daemon.reload()
                # With nothing in flight, a connection closes at once.
                await closed(idle)
                # A request that comes now is refused, saying why, and its connection closes.
                await late.stream.send_all(request[cut:])
                status, head = await late.response_head()
                assert (status, head.get("connection")) == (503, "close")
                assert json.loads(await late.body()) == {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "error": {"code": -32000, "message": REFUSED},
                }
                await closed(late)
                assert not replies  # the call still waits, and its connection with it
                await server.tell("answer")
            status, connection, reply = replies[0]
            assert (status, connection) == (200, "close")
            assert reply["result"]["content"] == [{"type": "text", "text": "called hold"}]
            await closed(calling)
    assert (
        "profile dev: 3 connection(s) on its socket closed, 0 HTTP session(s) opened on "
        "it ended: the profile 'dev' was removed by a reload" in caplog.text
    )


async def test_a_removed_profile_ends_the_event_streams_on_its_socket_and_answers_a_call(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, sock)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            sid = await open_session(daemon, unix=sock)
            async with (
                Client.open(daemon, unix=sock) as stream,
                Client.open(daemon, unix=sock) as page,
                Client.open(daemon, unix=sock) as calling,
            ):
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                # The status page's live updates, as a browser reads them.
                assert (await page.start("GET", {}, target="/page/events"))[0] == 200
                replies: list[Any] = []

                async def hold() -> None:
                    replies.append(await answer(calling, "POST", session_headers(sid), call(7)))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hold)
                    await server.tell("announce")
                    write_config(tmp_path, server, None)
                    await daemon.reload()
                    # The streams end whole (what they carried before is of no matter here).
                    for client in (stream, page):
                        while await client.message() is not None:
                            pass
                        await closed(client)
                    await server.tell("answer")
                status, connection, reply = replies[0]
                assert (status, connection) == (200, "close")
                assert reply["id"] == 7
                assert reply["result"]["content"] == [{"type": "text", "text": "called hold"}]
                await closed(calling)


async def test_a_removed_profile_ends_a_listen_over_http_with_its_final_response(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path)
    path = write_config(tmp_path, server, sock)
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            Client.open(daemon, unix=sock) as listening,
        ):
            headers, body = modern(4, "subscriptions/listen")
            body["params"]["notifications"] = {"toolsListChanged": True}
            assert (await listening.start("POST", headers, body))[0] == 200
            ack = await listening.message()
            assert ack is not None
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            write_config(tmp_path, server, None)
            await daemon.reload()
            messages = []
            while (message := await listening.message()) is not None:
                messages.append(message)
            assert messages[-1] == {
                "jsonrpc": "2.0",
                "id": 4,
                "result": {
                    "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/subscriptionId": 4},
                },
            }
            await closed(listening)


async def test_a_removed_profiles_http_call_not_answered_in_its_grace_is_told_why(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, sock, grace=0.5)
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            Client.open(daemon, unix=sock) as calling,
        ):
            replies: list[Any] = []

            async def hold() -> None:
                replies.append(await answer(calling, "POST", *modern(5, "tools/call", HOLD)))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await server.tell("announce")
                write_config(tmp_path, server, None, grace=0.5)
                await daemon.reload()
            status, connection, reply = replies[0]
            assert (status, connection) == (200, "close")
            assert reply["error"] == {
                "code": -32000,
                "message": "the profile 'dev' was removed by a reload, and this request was "
                "not answered in the 0.5 s it was given",
            }
            await closed(calling)


class Said(logging.Handler):
    """Sets ``event`` once a record holding ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_a_removed_profile_ends_the_sessions_opened_on_its_socket(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path)
    path = write_config(tmp_path, server, sock)
    said = Said(
        "profile dev: 1 connection(s) on its socket closed, 1 HTTP session(s) opened on it "
        "ended: the profile 'dev' was removed by a reload"
    )
    logging.getLogger("mcpd.agents").addHandler(said)
    try:
        with trio.fail_after(LIMIT), caplog.at_level(logging.INFO, "mcpd.agents"):
            async with running(load(path), str(path)) as daemon:
                sid = await open_session(daemon, unix=sock)
                async with Client.open(daemon, unix=sock) as stream:
                    assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                    write_config(tmp_path, server, None)
                    await daemon.reload()
                    await said.event.wait()  # once its connections are closed
                # The profile back as it was, at the same place: the old session is gone.
                write_config(tmp_path, server, sock)
                await daemon.reload()
                async with Client.open(daemon, unix=sock) as again:
                    status, _, reply = await answer(again, "POST", session_headers(sid), call(8))
                assert status == 404
                assert reply["error"]["message"] == "Session not found"
    finally:
        logging.getLogger("mcpd.agents").removeHandler(said)


def behind(calling: Client, rid: int) -> tuple[Client, bytes]:
    """A ``tools/list`` of id ``rid`` to send on ``calling``'s connection behind the
    request it awaits the answer to, as it goes on the wire, and what reads its answer."""
    second = Client(calling.stream, None)
    return second, second.encode("POST", *modern(rid, "tools/list"))


async def refused_behind(calling: Client, second: Client, rid: int) -> None:
    """The call ``calling`` sent is answered with its result and keeps the connection
    open; the request behind it (read by ``second``) is refused, saying why, and the
    connection closes."""
    status, head = await calling.response_head()
    assert (status, head.get("connection")) == (200, None)
    data = await calling.body()
    if head.get("content-type") == "text/event-stream":
        data = [ln[6:] for ln in data.split(b"\n") if ln.startswith(b"data: ")][-1]
    reply = json.loads(data)
    assert reply["result"]["content"] == [{"type": "text", "text": "called hold"}]
    if read := calling.conn.trailing_data[0]:  # no bytes would say the connection closed
        second.conn.receive_data(read)
    status, head = await second.response_head()
    assert (status, head.get("connection")) == (503, "close")
    assert json.loads(await second.body()) == {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {"code": -32000, "message": REFUSED},
    }
    await closed(calling)


async def test_a_removed_profile_refuses_the_http_request_pipelined_behind_a_call(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, sock)
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            Client.open(daemon, unix=sock) as calling,
        ):
            second, request = behind(calling, 9)
            # Both in one write, before the reload.
            await calling.stream.send_all(
                calling.encode("POST", *modern(8, "tools/call", HOLD)) + request
            )
            await server.tell("announce")
            write_config(tmp_path, server, None)
            await daemon.reload()
            await server.tell("answer")
            await refused_behind(calling, second, 9)


async def test_a_removed_profile_refuses_the_http_request_sent_while_a_call_runs(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, sock)
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            Client.open(daemon, unix=sock) as calling,
        ):
            await calling.stream.send_all(calling.encode("POST", *modern(10, "tools/call", HOLD)))
            await server.tell("announce")
            write_config(tmp_path, server, None)
            await daemon.reload()
            second, request = behind(calling, 11)
            await calling.stream.send_all(request)
            # The daemon has read it before the call is answered.
            await trio.testing.wait_all_tasks_blocked()
            await server.tell("answer")
            await refused_behind(calling, second, 11)
