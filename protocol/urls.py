"""A server's URL as people and agents are shown it: ``scheme://host[:port]/path``.

A configured URL may carry credentials, in its user info (``user:pass@``) or in its
query string (``?key=...``), and its fragment says nothing about the server. Status
pages, errors and logins show where a server is, never those: ``display_url`` keeps
the scheme, the host and port as written, and the path. It works on the text alone
(no parsing that could fail on a malformed URL and fall back to showing it whole),
in one pass.

``openable`` says whether an address a server sent is one to send a person's browser
to: an https page, or an http one on this machine, never a script or a file.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def display_url(url: str) -> str:
    """``url`` without its user info, query string and fragment."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    # The query or fragment ends the authority too (``http://host?x``), so cut them first.
    for end in "?#":
        rest = rest.partition(end)[0]
    authority, slash, path = rest.partition("/")
    host = authority.rpartition("@")[2]
    return f"{scheme}{sep}{host}{slash}{path}"


def openable(url: str) -> bool:
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    if u.scheme == "https":
        return bool(u.hostname)
    return u.scheme == "http" and (u.hostname or "") in ("localhost", "127.0.0.1", "::1")
