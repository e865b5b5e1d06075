"""The HTTP+SSE transport's event stream: the one GET that carries everything the
server sends, from opening it to the reason it ended.

``EventStream`` opens the stream on the configured origin (following redirects
that stay there), makes sure the reply is an event stream, decodes its events and
hands each to the transport, and turns however it ends (the server closed it, it
was cut, it never named an endpoint in time) into the ``TransportError`` that the
transport fails its pending requests with. It is apart from the transport
because none of this knows about requests, ids or POSTs: what an event means and
what an ending does to the session are the transport's to decide.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable
from typing import Final, Literal, TypeAlias

import trio

from protocol.http.parts import Origin
from protocol.http.sse import EventTooLarge, SSEDecoder, SSEError, SSEEvent, data_cost
from protocol.shown.server_urls import display_url
from protocol.shown.visible import quote

from ..base import AuthHook
from ..complaints import Complain, said_too_large
from ..errors import StreamCut, TransportClosed, TransportError
from ..http.connection import HttpConnection
from ..http.dial import connect
from ..http.request import IDENTITY
from ..http.send import authorized, with_authorization
from ..read_pace import Paced
from .events import REDIRECTS, encoded, stream_redirect_target, stream_refused

MAX_REDIRECTS: Final = 5
# What an event was to the transport: the one that named the endpoint, the answer to
# a request that waited for it, or anything else.
Taken: TypeAlias = Literal["endpoint", "answer"] | None
# How soon the kernel starts probing a quiet stream's connection: the stream may be
# silent for hours, so no read timeout watches it.
_STREAM_KEEPALIVE: Final = 60.0
# How much of a refusal's body is read (for its reason), on the stream or a POST.
ERROR_BODY_LIMIT: Final = 64 * 1024


class EventStream:
    def __init__(
        self,
        alias: str,
        origin: Origin,
        target: str,
        static: list[tuple[str, str]],
        *,
        ssl_context: ssl.SSLContext | None,
        connect_timeout: float,
        max_body: int,
    ) -> None:
        self.alias = alias
        self._origin = origin
        self._target = target
        self._static = static  # the configured headers
        self.auth: AuthHook | None = None  # credentials that change, as on every POST
        self._ssl_context = ssl_context
        self._connect_timeout = connect_timeout
        self._max_body = max_body

    @property
    def url(self) -> str:
        return f"{self._origin}{self._target}"

    async def read(
        self,
        on_event: Callable[[SSEEvent], Taken],
        paced: Paced,
        task_status: trio.TaskStatus[None],
        complain: Complain,
    ) -> TransportError:
        """Open the stream and read it until it ends, within its server's pace; what
        ended it.

        ``on_event`` says which event named the endpoint (and which answered a
        request): the stream must open and name one within ``connect_timeout``, and
        from then on the opening is over (``task_status``) and the stream may be
        quiet for as long as it likes. An event cut for its size is said in the journal,
        within ``complain``'s budget, and what reading it cost waited out before the
        cut is told.
        """
        conn: HttpConnection | None = None
        named = False
        try:
            with trio.move_on_after(self._connect_timeout) as waiting:
                conn = await with_authorization(self.auth, self._open)
                decoder = SSEDecoder(self._max_body)
                chunk: bytes | None = b""
                while chunk is not None:
                    await paced.before_read(decoder.held)
                    chunk = await conn.next_chunk()
                    paced.came()
                    if _take(decoder, chunk, on_event, paced):
                        named = True
                        # From now on the stream may be quiet for hours.
                        waiting.deadline = math.inf
                        task_status.started()
            if waiting.cancelled_caught:
                stage = "named no endpoint" if conn is not None else "did not open"
                raise TransportError(
                    f"{self.alias}: the event stream at {quote(display_url(self.url))} {stage} "
                    f"within {self._connect_timeout:g} s"
                )
            before = "" if named else " before naming an endpoint"
            return TransportClosed(f"{self.alias}: the server ended the event stream{before}")
        except SSEError as exc:
            cut = StreamCut(f"{self.alias}: {exc} on the event stream")
            if isinstance(exc, EventTooLarge):
                said_too_large(self.alias, cut.reason, complain)
                if named and conn is not None:
                    # The transport ends with its stream and the next has a pace of
                    # its own: what the cut event cost is waited out here, its server
                    # held back and no longer connected.
                    with trio.CancelScope(shield=True):
                        await conn.aclose()
                    conn = None
                    await paced.before_read()
            return cut
        except StreamCut as exc:
            what = exc.reason.removeprefix(f"{self.alias}: ")
            return StreamCut(f"{self.alias}: the event stream was cut: {what}")
        except TransportError as exc:
            return exc
        finally:
            if conn is not None:
                with trio.CancelScope(shield=True):
                    await conn.aclose()

    async def _open(self, authorization: str | None) -> HttpConnection:
        """The stream's own connection, its reply's head read and found to be a stream."""
        target = self._target
        for _ in range(MAX_REDIRECTS + 1):
            conn = await connect(
                self._origin,
                self.alias,
                ssl_context=self._ssl_context,
                connect_timeout=self._connect_timeout,
                read_timeout=None,
                tcp_keepalive=_STREAM_KEEPALIVE,
            )
            try:
                headers = [
                    ("Host", self._origin.authority),
                    ("Accept", "text/event-stream"),
                    IDENTITY,
                ]
                sent = authorized(encoded(headers + self._static), authorization)
                await conn.send(b"GET", target.encode(), sent, b"")
                head = await conn.receive_head()
                if head.status == 200 and head.media_type == "text/event-stream":
                    return conn
                if head.status not in REDIRECTS:
                    body = await conn.read_prefix(ERROR_BODY_LIMIT)
                    raise stream_refused(self.alias, head, body, conn.peer)
                target = stream_redirect_target(self.alias, self._origin, target, head)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await conn.aclose()
                raise
            await conn.aclose()
        raise TransportError(f"{self.alias}: more than {MAX_REDIRECTS} redirects for the stream")


def _take(
    decoder: SSEDecoder,
    chunk: bytes | None,
    on_event: Callable[[SSEEvent], Taken],
    paced: Paced,
) -> bool:
    """Hand on the events ``chunk`` completes (None, or nothing: the stream's end), and
    charge ``paced`` what reading them cost; whether one named the endpoint. None is
    held here once the stream is read on."""
    before, units, endpoint = decoder.line_cost, 0.0, False
    try:
        events = decoder.feed(chunk) if chunk else decoder.flush()
    except SSEError:
        paced.read(decoder.line_cost - before)  # an event cut for its size, too
        raise
    for event in events:
        taken = on_event(event)
        units += data_cost(event, answered=taken in ("endpoint", "answer"))
        endpoint = endpoint or taken == "endpoint"
    paced.read(units + decoder.line_cost - before)
    return endpoint
