"""The status page over HTTP: requests with a session, as a browser would send them."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlsplit

import trio

from mcpd.agents.page.passes import CODE_TTL
from tests.support.clients.agent import connect
from tests.support.clients.daemon_http import Reply


async def http(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> Reply:
    """One request on its own connection (Host: the endpoint's, unless given)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    fields = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    lines = [f"{method} {path} HTTP/1.1", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in fields.items()]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    await stream.aclose()
    return Reply(data)


def csrf_of(page: bytes) -> str:
    found = re.search(rb'<meta name="mcpd-csrf" content="([^"]+)">', page)
    assert found is not None, page[:300]
    return found.group(1).decode()


def forms(page: bytes, action: str) -> list[dict[str, str]]:
    """The fields of each of the page's forms that post to ``action``."""
    found = re.findall(rf'<form method="post" action="{action}">(.*?)</form>'.encode(), page, re.S)
    return [
        {
            k.decode(): unescape(v.decode())
            for k, v in re.findall(rb'name="([^"]+)" value="([^"]*)"', f)
        }
        for f in found
    ]


async def code_url(socket: str) -> str:
    async with connect(socket) as agent:
        out = await agent.result("mcpd/auth/dashboard")
    assert out["expires_in"] == CODE_TTL
    return str(out["url"])


async def session(port: int, socket: str) -> tuple[str, str]:
    """A cookie header of a new session, and its page's CSRF token."""
    url = urlsplit(await code_url(socket))
    traded = await http(port, "GET", f"/?{url.query}", {"Host": f"127.0.0.1:{port}"})
    assert traded.status == 200, traded.body
    cookie = traded.headers["set-cookie"].split(";")[0]
    page = await http(port, "GET", "/", {"Host": f"127.0.0.1:{port}", "Cookie": cookie})
    assert page.status == 200
    return cookie, csrf_of(page.body)
