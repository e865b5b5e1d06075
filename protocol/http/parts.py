"""HTTP's parts that do no I/O: where a URL points, which header values may be sent,
what a reply's head says, and which JSON-RPC error its body carries.

The HTTP transports, their request and reply logic and the OAuth client use them
on values alone: an origin to compare a redirect or an endpoint against, a header
to check before anything is sent, a ``Retry-After`` to wait for. The connections
that carry them are ``transports.http.connection``'s.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from datetime import UTC
from typing import Final, Literal
from urllib.parse import urljoin, urlsplit

import msgspec

from protocol.http.mcp_headers import is_plain, is_token
from protocol.jsonrpc import messages as rpc
from protocol.lines.oneline import one_line
from protocol.lines.textfaults import utf8_fault
from protocol.shown.server_urls import display_url, unreadable

from ..shown.visible import quote

# A request target as it goes on the request line: visible ASCII, nothing else.
_TARGET: Final = re.compile(r"[\x21-\x7e]+")

# Phrases legacy servers use when they do not know the session a request named.
_UNKNOWN_SESSION: Final = (
    "no valid session",
    "missing session",
    "session not found",
    "invalid session",
    "unknown session",
    "session expired",
)


class Origin(msgspec.Struct, frozen=True):
    scheme: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        """The Host header: IPv6 literals in brackets, the port only when not the default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}"


def parse_url(url: str) -> tuple[Origin, str]:
    """Split an endpoint URL into its origin and request target (path and query)."""
    problem = unreadable(url)
    if problem is not None:
        raise ValueError(f"invalid URL {quote(display_url(url))}: {problem}")
    parts = urlsplit(url)
    port = parts.port
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"URL {quote(display_url(url))} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"URL {quote(display_url(url))} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("credentials in the URL are not supported; configure a header instead")
    if port is None:
        port = 443 if scheme == "https" else 80
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Origin(scheme, parts.hostname, port), target


def same_origin(origin: Origin, target: str, location: str) -> str | None:
    """The request target ``location`` names (relative to ``target`` on ``origin``), or
    None when it leads elsewhere: the configured headers carry credentials, and they
    stay with their origin."""
    try:
        there, new = parse_url(urljoin(f"{origin}{target}", location))
    except ValueError:
        return None
    return new if there == origin else None


def sendable_target(target: str) -> bool:
    """Whether ``target`` can be sent as it is (a space or a non-ASCII letter, which a
    server may write in a Location, cannot)."""
    return _TARGET.fullmatch(target) is not None


def check_header(name: str, value: str) -> None:
    """Refuse a header h11 would refuse, before anything is sent (names only in the error)."""
    if not is_token(name):
        raise ValueError(f"invalid header name {name!r}")
    if value and not is_plain(value):
        raise ValueError(f"header {name} has a value that is not plain visible ASCII")


def header_list(
    headers: Mapping[str, str], what: str, reserved: frozenset[str]
) -> list[tuple[str, str]]:
    """``headers`` checked: none of the ``reserved`` ones (those a transport sets
    itself, lower case), no bad characters. ``what`` names them in the error."""
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name.lower() in reserved:
            raise ValueError(f"the {what} header {name} is set by the transport itself")
        check_header(name, value)
        out.append((name, value))
    return out


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or an HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


class ResponseHead(msgspec.Struct, frozen=True):
    status: int
    reason: str
    headers: list[tuple[str, str]]  # names lower-cased

    def get(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def get_all(self, name: str) -> str:
        return ", ".join(value for key, value in self.headers if key == name)

    @property
    def media_type(self) -> str:
        return self.written_media_type.lower()

    @property
    def written_media_type(self) -> str:
        """The media type as the server wrote it, its case kept: what a message quotes
        (a secret it echoed there is found only as it was sent)."""
        return (self.get("content-type") or "").split(";", 1)[0].strip()

    @property
    def content_coding(self) -> str | None:
        """The coding its body was sent in (``Content-Encoding``, as written), or None
        for the body as it is ("identity", or no header)."""
        coding = self.get_all("content-encoding").strip()
        return None if coding.lower() in ("", "identity") else coding

    @property
    def content_length(self) -> int | None:
        value = self.get("content-length")
        return int(value) if value is not None and value.isdigit() else None


class _ErrorBody(msgspec.Struct):
    # Its id is left unread: a server leaves it out of an error about a request it could
    # not read (server-everything does for unknown sessions), or writes one of its own
    # making, and the reply it came in already says which request it answers.
    jsonrpc: Literal["2.0"]
    error: rpc.ReceivedError


_error_body: Final = msgspec.json.Decoder(_ErrorBody)


def error_in(body: bytes) -> rpc.ErrorObject | None:
    """The JSON-RPC error an HTTP error reply's body carries, if it is one, whatever its
    id. Its data is kept as the bytes it came as (on one line, in UTF-8), as
    ``envelope.decode_message`` keeps it: what the server put there is counted and scanned
    before anything decodes it, wherever the error goes."""
    if utf8_fault(body) is not None:
        return None
    try:
        return _error_body.decode(one_line(body)).error.as_object()
    except (msgspec.DecodeError, RecursionError):
        return None


def names_unknown_session(error: rpc.ErrorObject) -> bool:
    """Whether a legacy server's error says it does not know the session a request named."""
    text = error.message.lower()
    return any(phrase in text for phrase in _UNKNOWN_SESSION)
