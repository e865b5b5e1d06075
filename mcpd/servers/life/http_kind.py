"""Which of the two HTTP transports a server speaks, found out when the one tried fails.

A URL may name a Streamable HTTP endpoint or an old HTTP+SSE (2024-11-05) one, and
configs rarely say which. mcpd tries the one the config implies ("sse" for URLs
ending in /sse, else Streamable HTTP); when that fails the way the other kind of
server answers (a 4xx to the POST, or a GET that opens no event stream), it asks the
URL the spec's way (``transports.sse.detect``) and uses the other transport from then
on, without counting the try as an outage.
"""

from __future__ import annotations

from typing import Final

import trio

from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from transports.base import AuthHook
from transports.errors import ServerCancelled, TransportError, UnexpectedReply

from ...config.tables.servertable import ServerConfig
from ..oauth import LoginRequired

# A 4xx that is about the request, not the caller or the moment: only these suggest
# the server speaks the other transport.
_NOT_A_MISMATCH: Final = frozenset({401, 403, 407, 408, 425, 429})
# How asking can fail besides an outage: the server answered, but not in a way that
# names a transport (a reply too large to read, an unreadable one, a cancel).
_NO_ANSWER: Final = (TransportError, MessageTooLarge, MalformedReply, ServerCancelled)


async def other_kind(
    alias: str, cfg: ServerConfig, kind: str, exc: Exception, auth: AuthHook | None = None
) -> str | None:
    """The other HTTP transport, when ``exc`` (a failure over ``kind``) comes from a
    server that speaks it; None when it says nothing about the transport.

    The questions carry the server's login (``auth``), as its messages do; one that
    finds a login is needed raises ``LoginRequired``."""
    if kind not in ("http", "sse") or cfg.url is None or not isinstance(exc, UnexpectedReply):
        return None
    if not 400 <= exc.status < 500 or exc.status in _NOT_A_MISMATCH:
        return None
    # Here, not at the top: every runner asks after a failure, and a stdio server's
    # daemon need not load both HTTP transports to be told None.
    from transports.http.params import HttpParams
    from transports.sse.detect import detect_http_transport

    # What reaching the server takes; the probe's replies are held to the transports'
    # own size limit.
    asking = HttpParams(
        headers=cfg.headers,
        connect_timeout=cfg.connect_timeout,
        tls_verify=cfg.tls_verify,
        ca_file=cfg.ca_file,
    )
    with trio.move_on_after(2 * cfg.connect_timeout):
        try:
            found = await detect_http_transport(alias, cfg.url, asking, auth=auth)
        except LoginRequired:
            raise
        except _NO_ANSWER:
            return None
        other = "sse" if found == "sse" else "http"
        return other if other != kind else None
    return None
