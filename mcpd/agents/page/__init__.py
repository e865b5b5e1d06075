"""The status page: ``GET /`` on the HTTP endpoint and on the socket's HTTP side.

``passes`` lets a browser in (one-time codes, session cookies, CSRF tokens),
``whose`` on a connection of its own user that no server of mcpd's holds, ``routes``
answers its requests, ``model`` reads what the daemon knows into typed
rows, ``render`` and ``charts`` draw them, and ``assets`` holds the page's own style
and script, with the Content-Security-Policy that admits exactly those.
"""

from __future__ import annotations


def is_page(target: bytes) -> bool:
    """Whether a request's target is the page's, which authenticates it itself (here,
    apart from the rest, so that telling costs no import of the page)."""
    path = target.partition(b"?")[0]
    return path == b"/" or path.startswith(b"/page/")
