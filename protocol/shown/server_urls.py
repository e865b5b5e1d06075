"""A server's URL as people and agents are shown it: ``scheme://host[:port]/path``.

A configured URL may carry credentials, in its user info (``user:pass@``) or in its
query string (``?key=...``), and its fragment says nothing about the server. Status
pages, errors and logins show where a server is, never those: ``display_url`` keeps
the scheme, the host and port as written, and the path. It works on the text alone
(no parsing that could fail on a malformed URL and fall back to showing it whole),
in one pass.

User info ends at an ``@``, and a password written as it is may hold a ``/``, ``?``
or ``#``, which a parser takes for the end of the host: in ``http://u:pa/ss@host/``
the "host" is ``u`` with the port ``pa``, and the path starts with the rest of the
password. So everything before the last ``@`` of a URL could be user info. When that
``@`` comes after the host's end and what stands for the host is no name a server has
(no dot in it, not ``localhost``, not an address in brackets, or a port after it: a
user name may have a dot, and a password may start with digits), or the port is not a
number (``u:pa%40ss`` with no ``@`` at all), no part of the host or path is shown: only
the scheme and ``HIDDEN``. A host that is a server's name keeps its path, ``@`` and
all: registries name servers so (``https://server.smithery.ai/@owner/name/mcp``).
``unreadable`` says why a parser refused a URL without quoting it (the parser's own
message quotes the part it could not read, which may be a password's).

``openable`` says whether an address a server sent is one to send a person's browser
to: an https page, or an http one on this machine, never a script or a file.

A host written with non-ASCII letters can pass for another: "accounts.google.com"
with a Cyrillic first letter (U+0430) reads as Google's. ``ascii_url`` and
``ascii_hosts`` give such a host in the ASCII form DNS is asked for (IDNA: ``xn--``
and the label's punycode), after the mapping browsers apply first (compatibility
forms such as full-width letters to their plain ones, then lower case), so what a
person checks is what the browser will reach; ``ascii_hosts`` also says which
hosts it rewrote. The commands show every address a server chose this way.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final
from urllib.parse import urlsplit

from .stand_ins import masked

# The scheme and authority of an http(s) URL within a text: up to its path, query or
# fragment, or what ends a URL in a sentence (a full stop or colon last is the
# sentence's). No character of the run is looked at more than twice.
_AUTHORITY: Final = re.compile(r"(?i:https?)://([^\s/?#'\"<>\\,;()]*[^\s/?#'\"<>\\,;().:])")
# Full stops that IDNA takes as the dot between labels.
_DOTS: Final = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
# A scheme as URLs write one: what else stands before "://" may be a password's start.
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# What stands for a host and path that are not shown.
HIDDEN: Final = "(hidden)"


def display_url(url: str) -> str:
    """``url`` without its user info, query string and fragment; only its scheme when
    what is left could hold user info (see the module's docstring). A value being
    masked is masked first (``masking``), so no cut here leaves a part of it."""
    scheme, sep, rest = masked(url).partition("://")
    if not sep or _SCHEME.fullmatch(scheme) is None:
        scheme, sep, rest = "", "", url
    # The query or fragment ends the host too (``http://host?x``).
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    at = rest.rfind("@")
    if at >= end and _server_name(rest[:end]):
        at = -1
    hostport = rest[at + 1 : end]
    if at >= end or not _numeric_port(hostport):
        return f"{scheme}{sep}{HIDDEN}"
    path = rest[end:]
    for cut in "?#":
        path = path.partition(cut)[0]
    return f"{scheme}{sep}{hostport}{path}"


def _server_name(hostport: str) -> bool:
    """Whether ``hostport`` names a server as hosts are named, with no port: what a user
    name and the start of a password (``u:123``, ``first.last:123``, ``token``) are not."""
    if hostport.startswith("["):
        return hostport.endswith("]")
    return (
        ":" not in hostport
        and "@" not in hostport
        and (hostport.lower() == "localhost" or "." in hostport)
    )


def _numeric_port(hostport: str) -> bool:
    """Whether ``hostport``'s port, if it has one, is written in digits."""
    if hostport.startswith("["):  # an IPv6 literal
        hostport = hostport.partition("]")[2]
    port = hostport.partition(":")[2]
    return not port or (port.isascii() and port.isdigit())


def unreadable(url: str) -> str | None:
    """What keeps ``urlsplit`` from reading ``url``, naming the part and not its value;
    None when it reads it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "its host is not a valid name or address"
    try:
        _ = parts.port
    except ValueError:
        return "its port is not a number from 0 to 65535"
    return None


def openable(url: str) -> bool:
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    if u.scheme == "https":
        return bool(u.hostname)
    return u.scheme == "http" and (u.hostname or "") in ("localhost", "127.0.0.1", "::1")


def ascii_host(host: str) -> str:
    """``host`` in the ASCII form DNS is asked for (``host`` itself when it is ASCII)."""
    if host.isascii():
        return host
    mapped = unicodedata.normalize("NFKC", host.translate(_DOTS)).lower()
    return ".".join(
        label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii")
        for label in mapped.split(".")
    )


def _rewritten(authority: str) -> tuple[str, str | None]:
    """``authority`` with its host in ASCII, and that host when it was not."""
    user, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):  # an IPv6 literal
        return authority, None
    host, colon, port = hostport.partition(":")
    ascii = ascii_host(host)
    if ascii == host:
        return authority, None
    return f"{user}{at}{ascii}{colon}{port}", ascii


def ascii_url(url: str) -> str:
    """``url`` with its host in ASCII, the rest as it is."""
    m = _AUTHORITY.match(url)
    if m is None:
        return url
    authority, _ = _rewritten(m.group(1))
    return url[: m.start(1)] + authority + url[m.end(1) :]


def ascii_hosts(text: str) -> str:
    """``text`` with the host of each http(s) URL in it in ASCII, followed by which
    hosts were written with non-ASCII letters (``text`` itself when none was)."""
    if text.isascii():
        return text
    rewritten: dict[str, None] = {}

    def one(m: re.Match[str]) -> str:
        authority, ascii = _rewritten(m.group(1))
        if ascii is None:
            return m.group()
        rewritten[ascii] = None
        return m.group()[: m.start(1) - m.start()] + authority

    out = _AUTHORITY.sub(one, text)
    if not rewritten:
        return text
    hosts = list(rewritten)
    if len(hosts) == 1:
        named = f"the host {hosts[0]} is"
    else:
        named = f"the hosts {', '.join(hosts[:-1])} and {hosts[-1]} are"
    return f"{out} ({named} written with non-ASCII letters; shown here in ASCII)"
