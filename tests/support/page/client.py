"""The status page driven by a program, as an agent's shell tool could drive it with
curl: ``python client.py SOCKET ADDRESS ACTION``.

ADDRESS is one that ``mcpd dashboard`` printed, or ``-``: this program then runs
``mcpd dashboard --no-browser`` itself for one; or ``session:PORT:COOKIE``, a session
opened already, by its cookie (taken from a browser, say). It trades the address's
code for a session on a connection of its own, reads the page, and for each ACTION given,
``decide`` approves every call waiting there and ``release`` every held change. It
prints one JSON object: the page's note on what this session may not do (``note``,
None if it has none), and for each approval sent the answer's status and what it said.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[3]
FORM = re.compile(r'<form method="post" action="(/page/(?:decide|release))">(.*?)</form>', re.S)
FIELD = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
NOTE = re.compile(r'<p id="look-only"[^>]*>(.*?)</p>', re.S)


def address(sock: str, given: str) -> str:
    if given != "-":
        return given
    done = subprocess.run(
        [sys.executable, "-m", "mcpd", "dashboard", "--no-browser", "--socket", sock],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found = re.search(r"http://\S+", done.stdout)
    assert found is not None, done.stdout + done.stderr
    return found.group(0)


def request(
    port: int, method: str, path: str, headers: dict[str, str], body: str = ""
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body.encode(), {"Host": f"127.0.0.1:{port}", **headers})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
    finally:
        conn.close()


def opened(sock: str, given: str) -> tuple[int, str]:
    """The endpoint's port and a session's cookie."""
    if given.startswith("session:"):
        _, port, cookie = given.split(":", 2)
        return int(port), cookie
    url = urlsplit(address(sock, given))
    assert url.port is not None
    status, headers, _ = request(url.port, "GET", f"/?{url.query}", {})
    assert status == 200, status
    return url.port, headers["set-cookie"].split(";")[0]


def main(sock: str, given: str, *actions: str) -> None:
    port, cookie = opened(sock, given)
    status, _, page = request(port, "GET", "/", {"Cookie": cookie})
    note = NOTE.search(page)
    csrf = re.search(r'<meta name="mcpd-csrf" content="([^"]+)">', page)
    assert csrf is not None
    acting = {
        "Cookie": cookie,
        "Origin": f"http://127.0.0.1:{port}",
        "X-Mcpd-Csrf": csrf.group(1),
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    wanted = {f"/page/{action}" for action in actions}
    answers: list[dict[str, Any]] = []
    for path, inner in FORM.findall(page):
        fields = {k: unescape(v) for k, v in FIELD.findall(inner)}
        if path not in wanted or fields.get("decision", "approve") != "approve":
            continue
        status, _, said = request(port, "POST", path, acting, urlencode(fields))
        answers.append({"status": status, "said": json.loads(said)})
    shown = None if note is None else unescape(re.sub(r"<[^>]+>", "", note.group(1)))
    print(json.dumps({"note": shown, "answers": answers}))


if __name__ == "__main__":
    main(*sys.argv[1:])
