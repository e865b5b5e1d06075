"""The OAuth client settings other hosts keep per server, as mcpd's ``[auth]`` table.

Claude Code and Gemini CLI keep an ``oauth`` object (``clientId``, ``clientSecret``,
``callbackPort`` or ``redirectUri``, ``scopes`` as a string or a list), Cursor an
``auth`` object (``CLIENT_ID``, ``CLIENT_SECRET``, ``scopes``). Endpoints pinned by
hand are not taken: mcpd finds the authorization server from the server's own
metadata and checks its issuer, which a pinned URL would skip.

What they say about which authorization server the client belongs to is kept as
``issuer``, the pin that keeps a client's secret from going to any other: an
``issuer`` as it is, or the one an ``authServerMetadataUrl`` of RFC 8414's form
names (``/.well-known/oauth-authorization-server`` before the issuer's path, or
OpenID's ``/.well-known/openid-configuration`` after it). The issuer is what the
metadata must say; a token or authorization URL's origin need not be it (an issuer
may have a path), so none is guessed from those, and a client secret left without
an issuer is named in the notes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

from protocol.jsonrpc import messages as rpc

from .jsonc import quoted_or_sized

_KEYS: Final = {
    "clientId": "client_id",
    "CLIENT_ID": "client_id",
    "clientSecret": "client_secret",
    "CLIENT_SECRET": "client_secret",
    "scopes": "scopes",
    "callbackPort": "redirect_port",
    "redirectUri": "redirect_port",
}
_DISCOVERED: Final = frozenset({"authorizationUrl", "tokenUrl", "audiences"})
_RFC8414: Final = "/.well-known/oauth-authorization-server"
_OPENID: Final = "/.well-known/openid-configuration"


def port_of(value: rpc.Json) -> int | None:
    """A callback port, or the port of a loopback http redirect URI."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 < value < 65536 else None
    if not isinstance(value, str):
        return None
    if value.isascii() and value.isdigit():
        # No port has more than five digits; a longer run is not read as a number,
        # which Python refuses past a few thousand digits.
        return port_of(int(value)) if len(value) <= 5 else None
    try:
        u = urlsplit(value)
        port = u.port
    except ValueError:
        return None
    loopback = u.hostname in ("127.0.0.1", "localhost", "::1")
    return port if u.scheme == "http" and loopback and port else None


def issuer_of_metadata_url(url: str) -> str | None:
    """The issuer whose metadata is at ``url``, when it has either well-known form."""
    if not _web_url(url):
        return None
    u = urlsplit(url)
    origin = f"{u.scheme}://{u.netloc}"
    if u.path == _RFC8414 or u.path.startswith(_RFC8414 + "/"):
        return origin + u.path.removeprefix(_RFC8414)
    if u.path.endswith(_OPENID):
        return origin + u.path.removesuffix(_OPENID)
    return None


def _web_url(text: str) -> bool:
    """An http(s) URL with a host and no query or fragment, as an issuer is."""
    try:
        u = urlsplit(text)
    except ValueError:
        return False
    return u.scheme in ("http", "https") and bool(u.netloc) and not (u.query or u.fragment)


def oauth_table(
    hints: rpc.Json, where: str, value: Callable[[rpc.Json, str], str], notes: list[str]
) -> rpc.JsonObject | None:
    """The ``[auth]`` table for ``hints`` (``value`` turns a string into mcpd's syntax;
    what is left out is said in ``notes``)."""
    if not isinstance(hints, dict):
        notes.append(f"{where}: not an object; not imported")
        return None
    if hints.get("enabled") is False:
        notes.append(f"{where}: OAuth is turned off there; not imported")
        return None
    auth: rpc.JsonObject = {}
    for key, raw in hints.items():
        at = f"{where}.{key}"
        name = _KEYS.get(key)
        if name in ("client_id", "client_secret"):
            auth[name] = value(raw, at)
        elif name == "scopes":
            scopes = raw.split() if isinstance(raw, str) else raw
            if isinstance(scopes, list) and all(isinstance(x, str) for x in scopes):
                auth["scopes"] = [value(x, at) for x in scopes]
            else:
                notes.append(f"{at}: not a list of scopes; not imported")
        elif name == "redirect_port":
            port = port_of(raw)
            if port is None:
                notes.append(f"{at}: {quoted_or_sized(raw)} is not a loopback port; not imported")
            else:
                auth["redirect_port"] = port
        elif key == "issuer":
            if isinstance(raw, str) and _web_url(raw):
                auth["issuer"] = value(raw, at)
            else:
                notes.append(f"{at}: {quoted_or_sized(raw)} is not an http(s) URL; not imported")
        elif key == "authServerMetadataUrl" and isinstance(raw, str):
            issuer = issuer_of_metadata_url(raw)
            if issuer is None:
                notes.append(
                    f"{at}: not an authorization server's well-known metadata URL, so it "
                    "names no issuer; mcpd finds the authorization server from the "
                    "server's own metadata; not imported"
                )
            elif "issuer" not in auth:
                auth["issuer"] = value(issuer, at)
        elif key in _DISCOVERED:
            notes.append(
                f"{at}: mcpd finds the authorization server from the server's own "
                "metadata; not imported"
            )
        elif key != "enabled":
            notes.append(f"{at}: not an OAuth setting mcpd has; not imported")
    if "client_secret" in auth and "client_id" not in auth:
        notes.append(f"{where}: a client secret without a client id; not imported")
        del auth["client_secret"]
    if "client_secret" in auth and "issuer" not in auth:
        notes.append(
            f"{where}: a client secret with no issuer; set issuer to the authorization "
            "server the client was registered at, or mcpd sends the secret to whichever "
            "one the server names"
        )
    return auth or None
