"""The URLs of MCP authorization: the canonical resource, the well-known documents.

* The canonical server URI (RFC 8707 §2 as MCP uses it) goes into ``resource=``:
  scheme and host lower-cased, the default port dropped, no fragment, no lone
  trailing slash.
* Protected-resource metadata (RFC 9728 §3.1) lives at the server's origin with
  ``/.well-known/oauth-protected-resource`` inserted before the path; MCP tries
  that first, then the bare well-known URL at the root.
* Authorization-server metadata (RFC 8414 §3.1, OIDC Discovery) for an issuer
  with a path is tried with the path inserted (OAuth, then OIDC) and then with the
  OIDC suffix appended; for an issuer without a path, OAuth then OIDC.
* A resource named by metadata must be the server or an ancestor of it: the same
  origin and a path that is a prefix of the server's path on a segment boundary.
  RFC 9728 §3.3 asks for identity; MCP servers commonly publish their root as the
  resource (conformance ``auth/metadata-var2``), which this still accepts, while a
  different origin (``auth/resource-mismatch``) never passes.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

import msgspec

from ..shown.server_urls import display_url, unreadable
from ..shown.visible import quote

PRM_SUFFIX: Final = "/.well-known/oauth-protected-resource"
OAUTH_SUFFIX: Final = "/.well-known/oauth-authorization-server"
OIDC_SUFFIX: Final = "/.well-known/openid-configuration"


class HttpUrl(msgspec.Struct, frozen=True):
    scheme: str  # "http" or "https"
    host: str  # lower-cased, IPv6 without brackets
    port: int  # always explicit
    path: str  # as given, "" when absent
    query: str  # without "?", "" when absent

    @property
    def default_port(self) -> bool:
        return self.port == (443 if self.scheme == "https" else 80)

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.default_port else f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.authority}"

    def with_path(self, path: str, query: str = "") -> str:
        return self.origin + path + (f"?{query}" if query else "")


def parse_http_url(url: str, what: str) -> HttpUrl:
    """Split an http(s) URL; ``ValueError`` (naming ``what``) for anything else."""
    problem = unreadable(url)
    if problem is not None:
        raise ValueError(f"{what} {quote(display_url(url))} is not a valid URL: {problem}")
    parts = urlsplit(url)
    port = parts.port
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{what} {quote(display_url(url))} must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{what} {quote(display_url(url))} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must not carry credentials in the URL")
    if port is None:
        port = 443 if scheme == "https" else 80
    return HttpUrl(scheme, parts.hostname.lower(), port, parts.path, parts.query)


def has_fragment(url: str) -> bool:
    return "#" in url


def canonical_resource(server_url: str) -> str:
    """The canonical URI of an MCP server, as sent in ``resource=``."""
    if has_fragment(server_url):
        raise ValueError(f"server URL {quote(display_url(server_url))} must not have a fragment")
    u = parse_http_url(server_url, "server URL")
    path = "" if u.path == "/" else u.path
    return u.with_path(path, u.query)


def resource_covers(resource: str, server_url: str) -> bool:
    """Whether metadata naming ``resource`` may speak for the server at ``server_url``."""
    if has_fragment(resource):
        return False
    try:
        r = parse_http_url(resource, "resource")
        s = parse_http_url(server_url, "server URL")
    except ValueError:
        return False
    if (r.scheme, r.host, r.port) != (s.scheme, s.host, s.port):
        return False
    if r.query and r.query != s.query:
        return False
    prefix = r.path.rstrip("/")
    path = s.path.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def prm_urls(server_url: str) -> list[str]:
    """The well-known protected-resource metadata URLs for a server, in order."""
    u = parse_http_url(server_url, "server URL")
    urls = []
    if u.path not in ("", "/") or u.query:
        urls.append(u.with_path(PRM_SUFFIX + (u.path if u.path != "/" else ""), u.query))
    urls.append(u.with_path(PRM_SUFFIX))
    return urls


def check_issuer(issuer: str) -> HttpUrl:
    """An issuer identifier must be an http(s) URL without query or fragment
    (RFC 8414 §2); whether http is acceptable is the URL policy's call."""
    if has_fragment(issuer):
        raise ValueError(f"issuer {quote(issuer)} must not have a fragment")
    u = parse_http_url(issuer, "issuer")
    if u.query or "?" in issuer:
        raise ValueError(f"issuer {quote(issuer)} must not have a query")
    return u


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's authorization-server metadata may be, in the order to try."""
    u = check_issuer(issuer)
    path = u.path.rstrip("/")
    if not path:
        return [u.with_path(OAUTH_SUFFIX), u.with_path(OIDC_SUFFIX)]
    return [
        u.with_path(OAUTH_SUFFIX + path),
        u.with_path(OIDC_SUFFIX + path),
        u.with_path(path + OIDC_SUFFIX),
    ]


def server_origin(server_url: str) -> str:
    """The authorization base URL of 2025-03-26: the server URL without its path."""
    return parse_http_url(server_url, "server URL").origin
