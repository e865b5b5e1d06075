"""The HTTP exchanges of the OAuth core, as plain values.

The core never sends anything. It hands out ``HttpRequest`` values; the I/O layer
executes them exactly as given (no redirects followed, no headers added except
Host and Content-Length) and feeds back an ``HttpResponse``. Both hide header
values and bodies from ``repr()``: a token request carries client secrets and
codes, a token response carries tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import urlencode

import msgspec

from ..jsonrpc.messages import JsonObject
from ..shown.visible import quote
from .errors import OAuthProtocolError

FORM: Final = "application/x-www-form-urlencoded"
JSON: Final = "application/json"

# What the OAuth documents and answers are allowed to weigh; metadata and token
# responses are a few KiB in practice.
MAX_BODY: Final = 256 * 1024


class HttpRequest(msgspec.Struct, frozen=True):
    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    # What the request is for, in words a user understands ("token request").
    purpose: str = "request"

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def __repr__(self) -> str:
        names = ", ".join(name for name, _ in self.headers)
        return (
            f"HttpRequest({self.method} {self.url}, {self.purpose}, "
            f"headers=[{names}], body={len(self.body)} bytes)"
        )

    __str__ = __repr__


class HttpResponse(msgspec.Struct, frozen=True):
    status: int
    headers: tuple[tuple[str, str], ...] = ()  # names lower-cased
    body: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def media_type(self) -> str:
        return self.written_media_type.lower()

    @property
    def written_media_type(self) -> str:
        """The media type as the server wrote it, its case kept: what an error quotes
        (a secret it echoed there is found only as it was sent)."""
        return (self.header("content-type") or "").split(";", 1)[0].strip()

    def __repr__(self) -> str:
        kind = self.media_type or "no type"
        return f"HttpResponse({self.status}, {kind}, {len(self.body)} bytes)"

    __str__ = __repr__


def get(url: str, purpose: str, extra: Sequence[tuple[str, str]] = ()) -> HttpRequest:
    return HttpRequest("GET", url, (("Accept", JSON), *extra), b"", purpose)


def post_form(
    url: str,
    fields: Iterable[tuple[str, str]],
    purpose: str,
    extra: Sequence[tuple[str, str]] = (),
) -> HttpRequest:
    body = urlencode(list(fields)).encode("ascii")
    headers = (("Content-Type", FORM), ("Accept", JSON), *extra)
    return HttpRequest("POST", url, headers, body, purpose)


def post_json(url: str, obj: object, purpose: str) -> HttpRequest:
    headers = (("Content-Type", JSON), ("Accept", JSON))
    return HttpRequest("POST", url, headers, msgspec.json.encode(obj), purpose)


def json_object(response: HttpResponse, what: str) -> JsonObject:
    """The body as a JSON object, or an error naming ``what`` (never quoting the
    body: it may be a token response, or a page an SSRF probe should not echo)."""
    if len(response.body) > MAX_BODY:
        raise OAuthProtocolError(f"{what}: the response is larger than {MAX_BODY} bytes")
    try:
        value = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        written = response.written_media_type
        kind = quote(written) if written else "no content type"
        raise OAuthProtocolError(
            f"{what}: the response (HTTP {response.status}, {kind}) is not JSON"
        ) from None
    except RecursionError:
        raise OAuthProtocolError(f"{what}: the response is JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise OAuthProtocolError(f"{what}: the response is JSON but not an object")
    return value
