"""HTTP/1.1 plumbing over an in-memory stream: requests read with their bodies capped,
a client's hang-up noticed (and what it sends meanwhile bounded), answers as one JSON
body or as an event stream, and a refusal that closes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
import trio.testing

from mcpd.agents.entry.places import OWNER_RESERVE
from mcpd.agents.http.wire import (
    _READ_SIZE,
    MAX_BODY,
    READ_AHEAD,
    Headers,
    Reject,
    Wire,
    WireResponse,
    refuse_and_close,
)
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import (
    MCP,
    answer_head,
    auth,
    http,
    listen_request,
    modern,
    modern_headers,
)
from tests.support.system.procs import scripted


class Client:
    """The other end of a wire: an h11 client over the memory stream."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def request(
        self,
        method: bytes = b"POST",
        body: bytes = b"",
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        fields = [(b"host", b"mcpd"), *(headers or [])]
        if not any(name == b"transfer-encoding" for name, _ in fields):
            fields.append((b"content-length", str(len(body)).encode()))
        await self.stream.send_all(
            self.conn.send(h11.Request(method=method, target="/mcp", headers=fields))
        )
        if body:
            await self.stream.send_all(self.conn.send(h11.Data(data=body)))
        await self.stream.send_all(self.conn.send(h11.EndOfMessage()))

    async def response(self) -> tuple[h11.Response, bytes, bool]:
        """The answer: its head, its body, whether it ended."""
        head: h11.Response | None = None
        body = b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive_some())
                continue
            if isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                assert head is not None
                return head, body, isinstance(event, h11.EndOfMessage)


def pair() -> tuple[Client, Wire]:
    client, server = trio.testing.memory_stream_pair()
    return Client(client), Wire(server)  # type: ignore[arg-type]


def fields(response: h11.Response) -> dict[bytes, bytes]:
    return dict(response.headers)


# -- headers --


def test_headers_are_found_whatever_their_case_and_the_first_of_several_counts() -> None:
    headers = Headers([(b"Accept", b"a"), (b"ACCEPT", b"b"), (b"X-Name", b"caf\xe9")])
    assert headers.get("accept") == "a" and headers.count("accept") == 2
    assert headers.get("x-name") == "café"  # latin-1: every byte is some character
    assert headers.get("missing") is None and headers.count("missing") == 0


# -- reading --


async def test_a_request_is_read_with_its_body_in_pieces_or_chunked() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request(body=b'{"a": 1}')
        got = await wire.read_request()
        assert got is not None and got[0].method == b"POST" and got[1] == b'{"a": 1}'
        await wire.send(h11.Response(status_code=204, headers=[]), h11.EndOfMessage())
        await client.response()
        client.conn.start_next_cycle()
        wire.conn.start_next_cycle()
        chunked = [(b"transfer-encoding", b"chunked")]
        await client.stream.send_all(
            client.conn.send(
                h11.Request(method=b"POST", target="/mcp", headers=[(b"host", b"x"), *chunked])
            )
        )
        for piece in (b"ab", b"cd", b"ef"):
            await client.stream.send_all(client.conn.send(h11.Data(data=piece)))
        await client.stream.send_all(client.conn.send(h11.EndOfMessage()))
        got = await wire.read_request()
        assert got is not None and got[1] == b"abcdef"


async def test_a_body_over_the_cap_is_refused_with_413_and_one_at_the_cap_is_read() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request(body=b"x" * MAX_BODY)
        got = await wire.read_request()
        assert got is not None and len(got[1]) == MAX_BODY
    client, wire = pair()
    with trio.fail_after(5):
        chunked = [(b"transfer-encoding", b"chunked")]
        await client.stream.send_all(
            client.conn.send(
                h11.Request(method=b"POST", target="/mcp", headers=[(b"host", b"x"), *chunked])
            )
        )
        # No length said up front: the cap holds while the body arrives.
        piece = client.conn.send(h11.Data(data=b"y" * _READ_SIZE))
        for _ in range(MAX_BODY // _READ_SIZE + 1):
            await client.stream.send_all(piece)
        assert await wire.read_head() is not None
        with pytest.raises(Reject) as reject:
            await wire.read_body()
        assert reject.value.status == 413


async def test_a_client_that_hangs_up_before_or_during_a_request_gives_no_request() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.stream.send_eof()
        assert await wire.read_request() is None and wire.broken
    client, wire = pair()
    with trio.fail_after(5):
        await client.stream.send_all(
            client.conn.send(
                h11.Request(
                    method=b"POST",
                    target="/mcp",
                    headers=[(b"host", b"x"), (b"content-length", b"10")],
                )
            )
            + client.conn.send(h11.Data(data=b"12345"))
        )
        await client.stream.send_eof()
        # Never the half of a body: no request, or h11's error its connection answers.
        with pytest.raises(h11.RemoteProtocolError):
            await wire.read_request()
        assert wire.broken


# -- noticing a hang-up while a request runs --


async def test_a_hang_up_while_a_request_runs_is_noticed_and_pipelined_bytes_are_kept() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request(body=b"{}")
        assert await wire.read_request() is not None
        await client.stream.send_all(b"GET /next HTTP/1.1\r\n")
        await client.stream.send_eof()
        await wire.wait_gone()
    assert wire.broken
    assert wire.conn.trailing_data[0] == b"GET /next HTTP/1.1\r\n"


def socket_pair() -> tuple[Client, Wire]:
    """As ``pair``, over a socket pair: for what the kernel is asked about."""
    client, server = trio.socket.socketpair()
    return Client(trio.SocketStream(client)), Wire(trio.SocketStream(server))


async def _push_until_blocked(stream: trio.SocketStream) -> int:
    """Bytes sent on ``stream`` until nothing more is taken in (the other end stopped
    reading and the kernel's buffers are full): how many."""
    sent = 0

    async def push() -> None:
        nonlocal sent
        while True:
            sent += await stream.socket.send(b"x" * _READ_SIZE)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(push)
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        nursery.cancel_scope.cancel()
    return sent


async def test_what_a_client_sends_while_its_request_runs_is_not_buffered_without_end() -> None:
    # A request that runs long (a listen, a slow tool) while its client streams bytes
    # that are no part of it: they must not pile up in the daemon's memory.
    client, wire = socket_pair()
    with trio.fail_after(10):
        await client.request(body=b"{}")
        assert await wire.read_request() is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wire.wait_gone)
            assert await _push_until_blocked(client.stream) > READ_AHEAD
            kept = len(wire.conn.trailing_data[0])
            assert kept <= READ_AHEAD, kept
            assert not wire.broken
            nursery.cancel_scope.cancel()


async def test_a_hang_up_behind_more_than_is_read_ahead_is_noticed() -> None:
    """Past the read-ahead nothing more was read, and so the hang-up behind it was
    never seen: a listen that writes nothing while the server is quiet kept its
    connection for good."""
    client, wire = socket_pair()
    with trio.fail_after(10):
        await client.request(body=b"{}")
        assert await wire.read_request() is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wire.wait_gone)
            assert await _push_until_blocked(client.stream) > READ_AHEAD
            await client.stream.aclose()
        assert wire.broken
        assert len(wire.conn.trailing_data[0]) <= READ_AHEAD


# -- answering --


async def test_a_json_answer_says_its_length_and_type_unless_given_one() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await WireResponse(wire, headers=[(b"x-a", b"1")]).json(200, b'{"ok":true}')
        head, body, ended = await client.response()
    assert head.status_code == 200 and body == b'{"ok":true}' and ended
    assert fields(head)[b"content-type"] == b"application/json"
    assert fields(head)[b"content-length"] == b"11" and fields(head)[b"x-a"] == b"1"
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await WireResponse(wire).json(202, b"")
        head, body, _ = await client.response()
    assert head.status_code == 202 and body == b"" and b"content-type" not in fields(head)
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await WireResponse(wire).json(200, b"hi", [(b"content-type", b"text/plain")])
        head, _, _ = await client.response()
    assert fields(head)[b"content-type"] == b"text/plain"


async def test_a_204_says_nothing_of_a_body() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await WireResponse(wire).json(204, b"")
        head, body, ended = await client.response()
    assert head.status_code == 204 and body == b"" and ended
    assert b"content-length" not in fields(head) and b"content-type" not in fields(head)


async def test_what_a_request_carries_goes_on_its_answer_of_either_kind_and_no_other() -> None:
    client, wire = pair()
    wire.carried = lambda request: [(b"x-for", request.method)]
    with trio.fail_after(5):
        await client.request(b"POST")
        await wire.read_request()
        await WireResponse(wire).json(401, b"{}")
        head, _, _ = await client.response()
        assert fields(head)[b"x-for"] == b"POST"
        client.conn.start_next_cycle()
        wire.conn.start_next_cycle()
        await client.request(b"GET")
        await wire.read_request()
        await WireResponse(wire).finish(None, 200)
        head, _, _ = await client.response()
    assert fields(head)[b"x-for"] == b"GET"
    assert fields(head)[b"content-type"] == b"text/event-stream"


async def test_a_message_before_the_answer_turns_it_into_an_event_stream() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        response = WireResponse(wire)
        await response.event(b'{"n":1}')
        await response.comment(b"keep-alive")
        await response.finish(b'{"answer":2}', 404)  # the status no longer applies
        head, body, ended = await client.response()
    assert head.status_code == 200 and ended
    assert fields(head)[b"content-type"] == b"text/event-stream"
    assert fields(head)[b"cache-control"] == b"no-cache"
    assert body == (
        b'event: message\ndata: {"n":1}\n\n: keep-alive\n\nevent: message\ndata: {"answer":2}\n\n'
    )


async def test_finishing_without_an_answer_ends_an_empty_stream() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await WireResponse(wire).finish(None, 200)
        head, body, ended = await client.response()
    assert fields(head)[b"content-type"] == b"text/event-stream" and body == b"" and ended


async def test_writing_to_a_client_that_has_gone_cancels_the_request_and_writes_no_more() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        await client.stream.aclose()
        scope = trio.CancelScope()
        response = WireResponse(wire, scope)
        await response.event(b"{}")
        assert wire.broken and scope.cancel_called
        await response.event(b"{}")  # nothing more is tried
        await response.finish(b"{}", 200)


# -- refusing --


async def test_a_refusal_answers_and_says_the_connection_closes() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_head()
        await refuse_and_close(wire, 401, b"no", [(b"www-authenticate", b"Bearer")])
        head, body, _ = await client.response()
    assert head.status_code == 401 and body == b"no"
    assert (
        fields(head)[b"connection"] == b"close" and fields(head)[b"www-authenticate"] == b"Bearer"
    )


async def test_a_refusal_after_the_answer_began_sends_nothing_more() -> None:
    client, wire = pair()
    with trio.fail_after(5):
        await client.request()
        await wire.read_request()
        response = WireResponse(wire)
        await response.event(b"{}")
        await refuse_and_close(wire, 500, b"late")
        await response.finish(b"{}", 200)
        head, body, _ = await client.response()
    assert head.status_code == 200 and b"late" not in body


# -- through a running daemon --


async def _pipelined_behind_a_listen(sock: trio.socket.SocketType, listen: bytes) -> int:
    """How much the daemon lets a client send behind a listen it holds open, once it
    reads no more: what the client got into its own and the daemon's buffers."""
    await sock.send(listen)
    assert (await sock.recv(65536)).startswith(b"HTTP/1.1 200 ")
    sent = 0
    junk = b"x" * _READ_SIZE

    async def push() -> None:
        nonlocal sent
        while True:
            sent += await sock.send(junk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(push)
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        nursery.cancel_scope.cancel()
    return sent


async def test_clients_that_pipeline_behind_long_requests_cost_one_read_each(
    tmp_path: Path,
) -> None:
    """Each connection holding a listen and pipelining 4 MiB behind it had the daemon
    keep all of it: 255 of them took it past 1 GiB. It is left in the kernel now, on the
    endpoint and on the socket alike, and the client is still served."""
    command, args = scripted("--tools", "1")
    cfg = make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            with trio.socket.socket() as tcp:
                # Its own buffer kept small, so what it gets in is the daemon's taking.
                tcp.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_SNDBUF, _READ_SIZE)
                await tcp.connect(("127.0.0.1", port))
                sent = await _pipelined_behind_a_listen(tcp, listen_request(port, token))
                assert sent < MAX_BODY // 4, sent
            with trio.socket.socket(trio.socket.AF_UNIX) as unix:
                await unix.connect(daemon.socket_path)
                sent = await _pipelined_behind_a_listen(unix, listen_request(port, token))
                assert sent < MAX_BODY // 4, sent
            healthy = await http(port, "GET", "/healthz", auth(token))
            assert healthy.status == 200, healthy.body[:200]


async def test_clients_that_hang_up_behind_pipelined_bytes_give_back_their_places(
    tmp_path: Path,
) -> None:
    """A listen with more pipelined behind it than the daemon reads ahead, then a
    hang-up: the connection kept its place for good, so that a few of them left the
    daemon's own user no place on the endpoint or the socket."""
    command, args = scripted("--tools", "1")
    cfg = make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        max_connections=1,
    )
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            listen = listen_request(port, token)
            for family in (trio.socket.AF_INET, trio.socket.AF_UNIX):
                address = ("127.0.0.1", port) if family == trio.socket.AF_INET else None
                # Every place the daemon's user may take, its reserve too.
                for _ in range(1 + OWNER_RESERVE):
                    with trio.socket.socket(family) as sock:
                        await sock.connect(address or daemon.socket_path)
                        sent = await _pipelined_behind_a_listen(sock, listen)
                        assert sent > READ_AHEAD, sent
                await trio.testing.wait_all_tasks_blocked(cushion=0.2)
                with trio.socket.socket(family) as sock:
                    await sock.connect(address or daemon.socket_path)
                    await sock.send(listen)
                    answer = await sock.recv(65536)
                    assert answer.startswith(b"HTTP/1.1 200 "), (family, answer[:300])


async def test_a_client_that_expects_100_continue_is_told_to_send_its_body(
    tmp_path: Path,
) -> None:
    """It was never told, so a client that waits for it before sending its body
    (curl does for a while, some clients until they are told) waited in vain."""
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    body = json.dumps(modern(1, "ping")).encode()
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            lines = [
                "POST /mcp HTTP/1.1",
                f"Host: 127.0.0.1:{port}",
                f"Authorization: Bearer {token}",
                *(f"{k}: {v}" for k, v in MCP.items()),
                *modern_headers("ping"),
                "Expect: 100-continue",
                f"Content-Length: {len(body)}",
            ]
            head = ("\r\n".join(lines) + "\r\n\r\n").encode()
            for where in ("endpoint", "socket"):
                if where == "endpoint":
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                else:
                    stream = await trio.open_unix_socket(daemon.socket_path)
                async with stream:
                    await stream.send_all(head)
                    told = await answer_head(stream)
                    assert told == b"HTTP/1.1 100 Continue\r\n\r\n", (where, told)
                    await stream.send_all(body)
                    answer = await answer_head(stream)
                    assert answer.startswith(b"HTTP/1.1 200 "), (where, answer[:300])
