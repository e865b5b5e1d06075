"""HTTP/1.1 connections for the Streamable HTTP transport: h11 over trio streams.

This is the I/O edge: every trio, OS, ssl and h11 failure is turned into a
``transports.errors`` error here (or in ``dial``, which opens the connections), once,
with the server's alias and what was being done at the time. Above these modules
nothing catches ``OSError`` or h11 errors.

The pool of keep-alive connections to a transport's origin is ``pool``'s.

What these connections speak in and do no I/O for (``ResponseHead``)
is in ``protocol.http.parts``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
import select
import ssl
from collections.abc import Iterator
from typing import Final, Literal, NoReturn

import h11
import trio

from protocol.http.parts import ResponseHead
from protocol.shown.visible import quote

from ..errors import (
    BodyTooLarge,
    StreamCut,
    TransportClosed,
    TransportError,
    UnexpectedReply,
)
from ..read_pace import Paced

__all__ = ["MAX_INTERIM", "HttpConnection", "client_tls", "io_errors", "make_ssl_context"]

_RECEIVE_SIZE: Final = 64 * 1024
# Interim (1xx) responses taken before the answer: a server sends a few at most (100
# Continue, 102 Processing, 103 Early Hints), and each is read for nothing.
MAX_INTERIM: Final = 8
_END: Final = h11.EndOfMessage()
# A header name (an RFC 9110 token), and what must never be inside a header's value.
_FIELD: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BREAKS: Final = re.compile(rb"[\r\n\0]")


@functools.lru_cache(maxsize=256)
def _header_block(headers: tuple[tuple[bytes, bytes], ...]) -> bytes | None:
    """The header lines of a request (None: a header that must not be sent); a
    session's requests carry the same headers, so most are made once."""
    parts: list[bytes] = []
    for name, value in headers:
        if not _FIELD.fullmatch(name) or _BREAKS.search(value):
            return None
        parts += (name, b": ", value, b"\r\n")
    return b"".join(parts)


@functools.lru_cache(maxsize=64)
def _exchange_of(method: bytes, target: bytes) -> h11.Request:
    """The request h11 follows an exchange by (its method and target are checked here)."""
    return h11.Request(
        method=method, target=target, headers=[(b"Host", b"mcpd"), (b"Content-Length", b"0")]
    )


def make_ssl_context(*, verify: bool = True, ca_file: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if ca_file is not None:
        ctx.load_verify_locations(cafile=ca_file)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def client_tls(scheme: str, *, verify: bool, ca_file: str | None) -> ssl.SSLContext | None:
    """How a transport reaches an origin of ``scheme``: TLS as configured for https,
    none for plain http."""
    return make_ssl_context(verify=verify, ca_file=ca_file) if scheme == "https" else None


_IO_FAILURES: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _io_error(
    label: str, doing: str, error: type[TransportError], exc: BaseException
) -> TransportError:
    """The transport's error for a failure of the stream while ``doing``."""
    if isinstance(exc, trio.BrokenResourceError):
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError):
            return error(f"{label}: TLS failure while {doing}: {cause}")
        return error(f"{label}: connection lost while {doing}: {cause or exc}")
    if isinstance(exc, trio.ClosedResourceError):
        return TransportClosed(f"{label}: connection already closed while {doing}")
    assert isinstance(exc, OSError)
    return error(f"{label}: connection error while {doing}: {exc.strerror or exc}")


@contextlib.contextmanager
def io_errors(label: str, doing: str, error: type[TransportError]) -> Iterator[None]:
    try:
        yield
    except _IO_FAILURES as exc:
        raise _io_error(label, doing, error, exc) from None


class HttpConnection:
    """One HTTP/1.1 connection; one exchange at a time, as h11 allows."""

    def __init__(self, stream: trio.abc.Stream, label: str, read_timeout: float | None) -> None:
        self._stream = stream
        self._h11 = h11.Connection(h11.CLIENT)
        self._label = label
        self._read_timeout = math.inf if read_timeout is None else read_timeout
        self._eof = False
        self.idle_since = 0.0
        # The scope of the exchange under way, when its sender keeps one: the read
        # timeout moves its deadline, where it would otherwise take a scope per read.
        self.watch: trio.CancelScope | None = None
        self._doing = ""
        # The address connected to: where a refusal's OAuth challenge came from.
        self.peer = _peer_of(stream)

    @property
    def finished(self) -> bool:
        """Both sides completed the exchange, so the connection can carry another."""
        return self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE

    def recycle(self) -> bool:
        """Ready for another exchange, if the last one finished with nothing past its
        end (else the connection is for closing): bytes the server sent beyond its
        answer would be read as the next request's."""
        if not self.finished or not self.looks_alive():
            return False
        self._h11.start_next_cycle()
        return True

    def looks_alive(self) -> bool:
        """Nothing waits to be read: an idle keep-alive connection with bytes (or EOF)
        waiting was closed by the server, or answers what it was not asked yet."""
        if self._h11.trailing_data[0]:
            return False
        sock = _socket_of(self._stream)
        if sock is None:
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return not poller.poll(0)

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)

    async def send(
        self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        """One request, its bytes put together here: the headers were checked where they
        were made (a transport's are kept per session), and h11 is told of a request of
        the same method and target without a body, which is all it reads of a client's
        request to follow the exchange (how the response is framed, whether the
        connection may carry another)."""
        conn = self._h11
        try:
            conn.send(_exchange_of(method, target))
        except h11.LocalProtocolError:
            raise TransportError(f"{self._label}: refused to send a malformed request") from None
        conn.send(_END)
        block = _header_block(tuple(headers))
        if block is None:
            raise TransportError(f"{self._label}: refused to send a malformed header")
        length = b"Content-Length: %d\r\n\r\n" % len(body)
        data = b"".join((method, b" ", target, b" HTTP/1.1\r\n", block, length, body))
        try:
            await self._stream.send_all(data)
        except _IO_FAILURES as exc:
            raise _io_error(self._label, "sending the request", TransportClosed, exc) from None

    async def receive_head(self) -> ResponseHead:
        """The head of the answer, past at most ``MAX_INTERIM`` interim responses: each
        head h11 takes is bounded, so a server sending interim ones without end costs a
        few heads' reading, not a loop that never waits on the network."""
        doing = "waiting for the response"
        interim = 0
        while True:
            event = self._event(doing, TransportClosed)
            if event is h11.NEED_DATA:
                self._h11.receive_data(await self._receive(doing, TransportClosed))
                continue
            if isinstance(event, h11.Response):
                return ResponseHead(
                    event.status_code,
                    event.reason.decode("latin-1"),
                    [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers],
                )
            if not isinstance(event, h11.InformationalResponse):
                raise TransportClosed(f"{self._label}: the server closed the connection unanswered")
            interim += 1
            if interim > MAX_INTERIM:
                raise UnexpectedReply(
                    f"{self._label}: more than {MAX_INTERIM} interim (1xx) responses "
                    "before the answer"
                )

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body, or ``None`` once the body is complete."""
        doing = "reading the response body"
        while self._h11.their_state is not h11.DONE:
            event = self._event(doing, StreamCut)
            if event is h11.NEED_DATA:
                self._h11.receive_data(await self._receive(doing, StreamCut))
                continue
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return None
            else:
                raise StreamCut(f"{self._label}: the response body ended early")
        return None

    def received_chunk(self) -> bytes | Literal[False] | None:
        """``next_chunk`` when it needs no I/O: the next piece of the body already
        received, or ``None`` once the body is complete; ``False`` when the rest is
        still to come (or cannot be read: ``next_chunk`` says why)."""
        conn = self._h11
        while conn.their_state is not h11.DONE:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return False
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return False
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return None
            else:
                return False
        return None

    async def read_body(self, head: ResponseHead, limit: int, paced: Paced | None = None) -> bytes:
        """The whole body, refusing (before reading it) one larger than ``limit``; read
        within its server's pace, when given one, as what it holds grows."""
        declared = head.content_length
        if declared is not None and declared > limit:
            self._too_large(head, limit)
        first = await self.next_chunk()
        if first is None:
            return b""
        if len(first) > limit:
            self._too_large(head, limit)
        if paced is not None:
            await paced.before_read(len(first))
        chunk = await self.next_chunk()
        if chunk is None:
            return first  # most bodies come whole: no copy to put them together
        # Its buffer becomes the body, without a copy.
        body = io.BytesIO()
        body.write(first)
        del first
        while chunk is not None:
            body.write(chunk)
            if body.tell() > limit:
                self._too_large(head, limit)
            if paced is not None:
                await paced.before_read(body.tell())
            chunk = await self.next_chunk()
        return body.getvalue()

    async def read_prefix(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body; a longer body is left unread (and the
        connection will not be reused)."""
        body = bytearray()
        while len(body) <= limit and (chunk := await self.next_chunk()) is not None:
            body += chunk
        return bytes(body[:limit])

    def _too_large(self, head: ResponseHead, limit: int) -> NoReturn:
        raise BodyTooLarge(
            f"{self._label}: HTTP {head.status} response body larger than {limit} bytes",
            status=head.status,
            size=head.content_length,
            limit=limit,
        )

    def _event(self, doing: str, error: type[TransportError]) -> object:
        """h11's next event from what was received (``NEED_DATA``: more must be)."""
        try:
            return self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            if self._eof:
                raise error(
                    f"{self._label}: the server closed the connection while {doing}"
                ) from None
            # h11 says what it could not read in the server's own bytes: quoted, as any
            # of a server's words in mcpd's sentence.
            raise UnexpectedReply(
                f"{self._label}: invalid HTTP from the server: {quote(str(exc))}"
            ) from None

    async def _receive(self, doing: str, error: type[TransportError]) -> bytes:
        watch = self.watch
        if watch is None:
            with trio.move_on_after(self._read_timeout) as scope:
                try:
                    data = bytes(await self._stream.receive_some(_RECEIVE_SIZE))
                except _IO_FAILURES as exc:
                    raise _io_error(self._label, doing, error, exc) from None
            if scope.cancelled_caught:
                raise self._quiet(doing)
        else:
            # The exchange's scope: armed only while waiting here, so the time a reader
            # spends elsewhere (answering what the server asked) is not silence.
            self._doing = doing
            watch.deadline = trio.current_time() + self._read_timeout
            try:
                data = bytes(await self._stream.receive_some(_RECEIVE_SIZE))
            except _IO_FAILURES as exc:
                raise _io_error(self._label, doing, error, exc) from None
            finally:
                watch.deadline = math.inf
        if not data:
            self._eof = True
        return data

    def quiet(self) -> TransportError:
        """Why an exchange whose ``watch`` ran out ended."""
        return self._quiet(self._doing)

    def _quiet(self, doing: str) -> TransportError:
        return TransportError(f"{self._label}: no data for {self._read_timeout:g} s while {doing}")


def _socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return stream.socket if isinstance(stream, trio.SocketStream) else None


def _peer_of(stream: trio.abc.Stream) -> str | None:
    sock = _socket_of(stream)
    if sock is None:
        return None
    try:
        return str(sock.getpeername()[0])
    except OSError:  # no longer connected
        return None
