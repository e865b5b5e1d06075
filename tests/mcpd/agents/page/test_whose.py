"""A page's session is its own local user's, through a running daemon: the cookie of a
session, sent by the browser to another user's server on another port of 127.0.0.1,
gets that user nothing on a connection of theirs; the user who trades a code is the
one its session admits; a cookie of the page's name planted before the real one
neither locks the user out nor is taken."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio

from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import Reply
from tests.support.page.http_session import code_url, csrf_of, http, session
from tests.support.system.procs import scripted

LIMIT = 60


def config(tmp_path: Path) -> Any:
    command, args = scripted()
    return make_config(
        tmp_path,
        {"files": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        startup_deadline=10.0,
    )


# One request to 127.0.0.1:argv[1] (method, path, headers as JSON, body); writes the
# raw answer out. Run as another user, its connection is that user's.
ONE_HTTP = """
import json, socket, sys
port, method, path, fields, body = sys.argv[1:6]
s = socket.create_connection(("127.0.0.1", int(port)))
lines = [f"{method} {path} HTTP/1.1", "Connection: close", f"Content-Length: {len(body)}"]
lines += [f"{k}: {v}" for k, v in json.loads(fields).items()]
s.sendall(("\\r\\n".join(lines) + "\\r\\n\\r\\n" + body).encode())
out = b""
while chunk := s.recv(65536):
    out += chunk
sys.stdout.buffer.write(out)
"""
NOBODY = 65534
needs_root_uid = pytest.mark.skipif(
    os.geteuid() != 0, reason="a connection of another user is made by switching to it as root"
)


async def http_as(
    uid: int, port: int, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> Reply:
    """One request on a connection of ``uid``'s own (a process run as that user)."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

    def become() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    fields = json.dumps({"Host": f"127.0.0.1:{port}", **headers})
    out = await trio.run_process(
        [python, "-c", ONE_HTTP, str(port), method, path, fields, body.decode()],
        capture_stdout=True,
        preexec_fn=become,
    )
    return Reply(out.stdout)


@needs_root_uid
async def test_a_session_is_refused_on_another_local_users_connection(tmp_path: Path) -> None:
    """Browsers send 127.0.0.1's cookies to every port there: another user's server can
    be sent the cookie, and must get nothing with it."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            cookie, csrf = await session(port, daemon.socket_path)
            mine = await http_as(os.getuid(), port, "GET", "/", {"Cookie": cookie})
            assert mine.status == 200 and csrf_of(mine.body) == csrf
            stolen = await http_as(NOBODY, port, "GET", "/", {"Cookie": cookie})
            assert stolen.status == 401 and b"mcpd-csrf" not in stolen.body
            act = {
                "Cookie": cookie,
                "Origin": f"http://127.0.0.1:{port}",
                "X-Mcpd-Csrf": csrf,
                "Content-Type": "application/x-www-form-urlencoded",
            }
            acted = await http_as(NOBODY, port, "POST", "/page/login", act, b"server=files")
            assert acted.status == 403 and "takes a session" in acted.json()["error"]
            # The user who trades a code is the one its session admits.
            url = urlsplit(await code_url(daemon.socket_path))
            traded = await http_as(NOBODY, port, "GET", f"/?{url.query}", {})
            assert traded.status == 200
            theirs = traded.headers["set-cookie"].split(";")[0]
            assert (await http_as(NOBODY, port, "GET", "/", {"Cookie": theirs})).status == 200
            assert (await http(port, "GET", "/", {"Cookie": theirs})).status == 401


async def test_a_planted_cookie_of_the_pages_name_does_not_lock_the_user_out(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            cookie, csrf = await session(port, daemon.socket_path)
            name = cookie.partition("=")[0]
            for planted in (f"{name}=planted", f"{name}=" + "A" * 43):
                page = await http(port, "GET", "/", {"Cookie": f"{planted}; {cookie}"})
                assert page.status == 200 and csrf_of(page.body) == csrf
                alone = await http(port, "GET", "/", {"Cookie": planted})
                assert alone.status == 401


async def test_a_jar_filled_by_another_users_page_does_not_lock_the_user_out(
    tmp_path: Path,
) -> None:
    """Cookies know no ports: a page of another user on 127.0.0.1 set 30 cookies of
    3,900 bytes, and every request of the user's browser to the endpoint, a fresh
    dashboard code's included, got 431 until the user cleared them."""
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            bomb = "; ".join(f"bomb{n}=" + "b" * 3900 for n in range(30))
            # A browser's whole jar for a host: 180 cookies of 4 KiB.
            jar = "; ".join(f"c{n:03}=" + "j" * (4096 - 5) for n in range(180))
            for planted in (bomb, jar):
                url = urlsplit(await code_url(daemon.socket_path))
                traded = await http(port, "GET", f"/?{url.query}", {"Cookie": planted})
                assert traded.status == 200, traded.body[:300]
                cookie = traded.headers["set-cookie"].split(";")[0]
                page = await http(port, "GET", "/", {"Cookie": f"{planted}; {cookie}"})
                assert page.status == 200, page.body[:300]
                assert "mcpd-csrf" in page.body.decode()
