"""What an HTTP transport, Streamable HTTP or HTTP+SSE, is given from its server's
configuration: one value both transports and the detection of which one a server
speaks take, as the stdio transport takes ``StdioParams``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from protocol.pacing.read_budget import DEFAULT_RATE

__all__ = ["DEFAULT_HTTP_PARAMS", "HttpParams"]

# The largest message a reply may carry, where the transport's owner sets no other.
DEFAULT_MAX_BODY: Final = 64 * 1024 * 1024


class HttpParams(msgspec.Struct, frozen=True):
    # Sent with every message; they may carry credentials.
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    connect_timeout: float = 10.0
    # The silence allowed between two reads of a reply (None: no bound).
    read_timeout: float | None = 300.0
    tls_verify: bool = True
    ca_file: str | None = None
    # Connections held at once: as many as calls may be under way.
    pool_size: int = 16
    max_body: int = DEFAULT_MAX_BODY
    # What the server's streams are read at of what answers no request
    # (``protocol.pacing.read_budget``).
    read_budget: int = DEFAULT_RATE


DEFAULT_HTTP_PARAMS: Final = HttpParams()
