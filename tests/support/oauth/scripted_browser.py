"""A "browser" for login tests: ``python scripted_browser.py URL``.

Given to ``mcpd auth login`` as ``$BROWSER``, it does what a person's browser does
with an authorization server that approves at once: GET the authorization URL,
follow its redirects, and end at the loopback redirect address, which it also
requests (so ``mcpd auth login``'s listener receives the code). It sends nothing
else: no cookies, no form. With ``--print`` it stops before the loopback address
and prints it instead, the way a person over SSH copies it from the address bar.

Given a ``file:`` address (the private page ``mcpd auth login`` opens), it reads the
page and follows its refresh, as a browser does. With ``--hold SOCKET`` it first
connects to the Unix socket SOCKET and waits there for one byte, so a test can look
at the running browser (its command line) before it goes on.

Exit status 0 when the redirect address was reached (or printed), 1 otherwise.
"""

from __future__ import annotations

import html
import http.client
import re
import socket
import sys
from urllib.parse import parse_qs, unquote, urljoin, urlsplit

MAX_HOPS = 10


def get(url: str) -> http.client.HTTPResponse:
    u = urlsplit(url)
    conn_type = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(u.hostname or "", u.port, timeout=10)
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    conn.request("GET", target, headers={"User-Agent": "scripted-browser"})
    return conn.getresponse()


_REFRESH = re.compile(r"<meta http-equiv=\"refresh\" content=\"0; url='([^']*)'\">")


def from_page(url: str) -> str:
    """Where a local page's refresh sends the browser."""
    with open(unquote(urlsplit(url).path), encoding="utf-8") as f:
        found = _REFRESH.search(f.read())
    if found is None:
        raise SystemExit(f"scripted browser: {url} sends the browser nowhere")
    return html.unescape(found.group(1))


def hold(path: str) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.recv(1)


def main(argv: list[str]) -> int:
    print_only = "--print" in argv
    if "--hold" in argv:
        at = argv.index("--hold")
        hold(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    url = next(a for a in argv if not a.startswith("--"))
    if url.startswith("file:"):
        url = from_page(url)
    # Where the login comes back to is in the authorization request itself.
    home = parse_qs(urlsplit(url).query).get("redirect_uri", [""])[0]
    for _ in range(MAX_HOPS):
        back_home = bool(home) and url.split("?", 1)[0] == home
        if back_home and print_only:
            print(url, flush=True)
            return 0
        response = get(url)
        response.read()
        location = response.getheader("Location")
        if back_home:
            return 0 if response.status == 200 else 1
        if not 300 <= response.status < 400 or not location:
            print(f"scripted browser: {url} answered {response.status}", file=sys.stderr)
            return 1
        url = urljoin(url, location)
    print("scripted browser: too many redirects", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
