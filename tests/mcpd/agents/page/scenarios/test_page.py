"""The status page over HTTP, through a running daemon: read-only on the socket, behind a
one-time code and a session cookie on the endpoint, actions only with the session's
CSRF token from the page's own origin, a profile's socket showing its servers only,
and ``mcpd dashboard``."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from mcpd.agents.page.passes import CODE_TTL, MAX_CODES, Passes
from mcpd.agents.page.routes import Page
from mcpd.agents.page.sources import (
    CallFilter,
    CallRow,
    HeldChange,
    PendingApproval,
    Sources,
    Waiting,
)
from mcpd.local.state.endpoint_token import write_token
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import CURL, Reply, curl
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.login import mcpd
from tests.support.oauth.protected_mcp import serve_protected
from tests.support.oauth.scripted_browser import from_page
from tests.support.page.http_session import code_url, csrf_of, http, session
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, socket_open_to
from tests.support.system.procs import scripted
from transports.http.oauth_client import OAuthHttp

LIMIT = 60
T = 1_800_000_000.0


def scripted_server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


BROKEN = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}


def config(tmp_path: Path, **daemon: Any) -> Any:
    daemon.setdefault("http_listen", "127.0.0.1:0")
    return make_config(
        tmp_path,
        {"files": scripted_server("--tools", "3"), "mail": scripted_server(), "broken": BROKEN},
        profiles={"mail": {"servers": ["mail"], "socket": str(tmp_path / "mail.sock")}},
        state_dir=str(tmp_path / "state"),
        startup_deadline=10.0,
        backoff_base=30.0,
        backoff_cap=30.0,
        **daemon,
    )


def rows(page: bytes) -> dict[str, str]:
    """Each server's row on the page: alias -> its state."""
    found = re.findall(rb'<tr class="[a-z]+" data-server="([^"]+)" data-state="([^"]+)"', page)
    return {a.decode(): s.decode() for a, s in found}


async def test_the_socket_serves_the_page_for_reading(tmp_path: Path) -> None:
    assert CURL is not None
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path, http_listen=None)) as daemon:
            page = await curl(daemon.socket_path, "/")
            assert page.status == 200
            assert page.headers["content-type"] == "text/html; charset=utf-8"
            csp = page.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe-inline" not in csp and "script-src 'sha256-" in csp
            assert rows(page.body) == {"broken": "failed", "files": "ready", "mail": "ready"}
            assert b"exited with status 3" in page.body
            assert b"<svg" in page.body and b'rect class="down"' in page.body
            # Read-only: no CSRF token on the page, no button, and a POST is refused.
            assert b'<meta name="mcpd-csrf"' not in page.body
            assert b'<form method="post"' not in page.body
            # What waits: what this mcpd records (calls to approve, held changes).
            assert (
                b"No server waits for a login or a fix to its configuration; no call waits "
                b"for an approval; no changed definition is held.<"
            ) in page.body
            assert b'<section id="calls">' in page.body  # the latest calls, none yet
            refused = await curl(daemon.socket_path, "/page/login", "--data", "server=files")
            assert refused.status == 403
            assert "takes a session" in refused.json()["error"]
            # A profile's own socket shows that profile's servers, nothing of the others.
            mine = await curl(str(tmp_path / "mail.sock"), "/")
            assert rows(mine.body) == {"mail": "ready"}
            assert b"broken" not in mine.body and b"tools \xc2\xb7 profiles" in mine.body
            assert b">files<" not in mine.body
            assert b"(profile mail)" in mine.body
            # Held changes and approvals are the owner's to see and decide, not a
            # profile's readers'; its latest calls are the profile's.
            assert b"No server waits for a login or a fix to its configuration.<" in mine.body
            assert b'<section id="calls">' in mine.body


async def test_a_one_time_code_opens_one_session_and_only_once(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            host = {"Host": f"127.0.0.1:{port}"}
            bare = await http(port, "GET", "/", host)
            assert bare.status == 401 and b"mcpd dashboard" in bare.body
            assert "frame-ancestors 'none'" in bare.headers["content-security-policy"]

            url = urlsplit(await code_url(daemon.socket_path))
            assert (url.scheme, url.hostname, url.port) == ("http", "127.0.0.1", port)
            traded = await http(port, "GET", f"/?{url.query}", host)
            assert traded.status == 200 and traded.headers["refresh"] == "0; url=/"
            cookie = traded.headers["set-cookie"]
            assert cookie.startswith(f"mcpd_page_{port}=")
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
            again = await http(port, "GET", f"/?{url.query}", host)
            assert again.status == 403 and "set-cookie" not in again.headers
            assert b"has been used" in again.body

            pair = cookie.split(";")[0]
            page = await http(port, "GET", "/", {**host, "Cookie": pair})
            assert page.status == 200 and rows(page.body)["files"] == "ready"
            assert csrf_of(page.body)
            # The token holder (curl) reads it too, without a session: no actions.
            token = daemon.http_token()
            with_token = await http(port, "GET", "/", {"Authorization": f"Bearer {token}"})
            assert with_token.status == 200 and b'<meta name="mcpd-csrf"' not in with_token.body
            wrong = await http(port, "GET", "/", {"Authorization": "Bearer nope"})
            assert wrong.status == 401
            # A name that is not this endpoint's (DNS rebinding) gets nothing.
            rebound = await http(port, "GET", "/", {"Host": f"evil.example:{port}"})
            assert rebound.status == 403
            # A new token (mcpd token --rotate) ends the session.
            write_token(str(tmp_path / "state" / "token"))
            ended = await http(port, "GET", "/", {**host, "Cookie": pair})
            assert ended.status == 401


async def test_a_forged_post_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            cookie, csrf = await session(port, daemon.socket_path)
            own = f"http://127.0.0.1:{port}"
            base = {"Host": f"127.0.0.1:{port}", "Cookie": cookie}
            form = {"Content-Type": "application/x-www-form-urlencoded"}

            async def login(headers: dict[str, str], body: str = "server=files") -> Reply:
                return await http(port, "POST", "/page/login", {**base, **form, **headers},
                                  body.encode())  # fmt: skip

            no_token = await login({"Origin": own})
            assert no_token.status == 403 and "CSRF" in no_token.json()["error"]
            foreign = await login({"Origin": "http://127.0.0.1:9", "X-Mcpd-Csrf": csrf})
            assert foreign.status == 403
            no_origin = await login({"X-Mcpd-Csrf": csrf})
            assert no_origin.status == 403 and "from the page" in no_origin.json()["error"]
            other = "x" if csrf[-1] != "x" else "y"  # a token one character off
            wrong = await login({"Origin": own, "X-Mcpd-Csrf": csrf[:-1] + other})
            assert wrong.status == 403
            no_session = await http(
                port,
                "POST",
                "/page/login",
                {"Host": f"127.0.0.1:{port}", "Origin": own, "X-Mcpd-Csrf": csrf, **form},
                b"server=files",
            )
            assert no_session.status == 403
            # With all three, the action runs: this one says why files has no login.
            fair = await login({"Origin": own, "X-Mcpd-Csrf": csrf})
            assert fair.status == 409 and "stdio server" in fair.json()["error"]
            form_field = await login({"Origin": own}, f"server=files&csrf={csrf}")
            assert form_field.status == 409
            # A page of one profile approves no held change: that is the owner's.
            scoped = await http(
                port,
                "POST",
                "/page/release?profile=mail",
                {**base, **form, "Origin": own, "X-Mcpd-Csrf": csrf},
                b"server=mail&kind=tool&name=tool0&digest=x",
            )
            assert scoped.status == 409 and "own user and root" in scoped.json()["error"]


async def test_a_login_starts_on_the_page_and_comes_back_to_it(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            cfg = make_config(
                tmp_path,
                {"t": {"url": srv.mcp_url}},
                state_dir=str(tmp_path / "state"),
                http_listen="127.0.0.1:0",
                startup_deadline=5.0,
            )
            async with running(cfg) as daemon:
                assert daemon.agent_server.endpoint is not None
                port = daemon.agent_server.endpoint.port
                own = f"http://127.0.0.1:{port}"
                cookie, csrf = await session(port, daemon.socket_path)
                base = {"Host": f"127.0.0.1:{port}", "Cookie": cookie}
                page = await http(port, "GET", "/", base)
                assert rows(page.body) == {"t": "needs_login"}
                assert b"<code>mcpd auth login t</code>" in page.body
                assert b'data-login="t"' in page.body  # the button
                started = await http(
                    port,
                    "POST",
                    "/page/login",
                    {**base, "Origin": own, "X-Mcpd-Csrf": csrf, "Accept": "application/json"},
                    b"server=t",
                )
                assert started.status == 200, started.body
                url = started.json()["url"]
                client = OAuthHttp()
                redirect = await follow_authorization(
                    client, url, await client.policy_for(srv.mcp_url)
                )
                # Below the server's own landing, the authorization server's own.
                assert redirect.startswith(f"{own}/page/oauth/t/")
                # The browser comes back from the authorization server: no cookie.
                back = urlsplit(redirect)
                came = await http(
                    port, "GET", f"{back.path}?{back.query}", {"Host": f"127.0.0.1:{port}"}
                )
                assert came.status == 200 and b"t is ready with 1 tools" in came.body
                page = await http(port, "GET", "/", base)
                assert rows(page.body) == {"t": "ready"}
                # The same answer again finds no login waiting.
                stale = await http(
                    port, "GET", f"{back.path}?{back.query}", {"Host": f"127.0.0.1:{port}"}
                )
                assert stale.status == 404
    assert srv.failures == []


async def test_mcpd_dashboard_prints_an_address_or_how_to_get_one(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path, http_listen=None)) as daemon:
            code, said = await mcpd(daemon.socket_path, "dashboard", "--no-browser")
            assert code == 1
            # Started without a config file, as here: no file of its own turns it on.
            assert 'http_listen = "127.0.0.1:8765"' in said and "--config FILE" in said
            assert f"curl --unix-socket {daemon.socket_path} http://mcpd/" in said
        async with running(config(tmp_path / "on")) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            code, said = await mcpd(daemon.socket_path, "dashboard", "--no-browser")
            assert code == 0, said
            found = re.search(rf"http://127\.0\.0\.1:{port}/\?code=[\w-]+", said)
            assert found is not None, said
            traded = await http(port, "GET", found.group(0)[len(f"http://127.0.0.1:{port}") :],
                                {"Host": f"127.0.0.1:{port}"})  # fmt: skip
            assert traded.status == 200
            # Where the desktop has a browser, the address is opened in it, through a page
            # of this user's: on the opener's command line, other users could read the code.
            opened = tmp_path / "opened"
            os.mkfifo(opened)
            browser = tmp_path / "browser"
            browser.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {opened}\n")
            browser.chmod(0o755)
            ended: list[tuple[int, str]] = []

            async def dashboard() -> None:
                env = {"BROWSER": str(browser)}
                ended.append(await mcpd(daemon.socket_path, "dashboard", env=env))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(dashboard)
                page = await trio.to_thread.run_sync(opened.read_text, abandon_on_cancel=True)
                assert page.startswith("file:") and "code=" not in page
                assert stat.S_IMODE(os.stat(urlsplit(page).path).st_mode) == 0o600
                url = from_page(page)
                assert url.startswith(f"http://127.0.0.1:{port}/?code=")
                # The browser trades the code: the command ends, and the page with it.
                traded = await http(port, "GET", url[len(f"http://127.0.0.1:{port}") :],
                                    {"Host": f"127.0.0.1:{port}"})  # fmt: skip
                assert traded.status == 200
            [(code, said)] = ended
            assert code == 0 and url in said, said
            assert not os.path.exists(urlsplit(page).path)


async def test_codes_expire_and_are_bounded(autojump_clock: trio.testing.MockClock) -> None:
    passes = Passes(lambda: "token")
    late = passes.issue()
    await trio.sleep(CODE_TTL + 1)
    assert passes.redeem(late, os.getuid()) is None
    codes = [passes.issue() for _ in range(MAX_CODES + 1)]
    assert passes.redeem(codes[0], os.getuid()) is None  # pushed out by the newest
    sid = passes.redeem(codes[-1], os.getuid())
    assert sid is not None and passes.session(sid) is not None
    assert passes.redeem(codes[-1], os.getuid()) is None
    assert passes.session("guess") is None


async def test_decisions_and_calls_come_in_as_sources(tmp_path: Path) -> None:
    """Approvals, held changes and the latest calls are each one typed function: the page
    draws them (and, without them, no section at all), and its actions reach them."""
    decided: list[tuple[str, str]] = []

    async def decide(rid: str, decision: str, scope: object, decider: object) -> str:
        decided.append((rid, decision))
        return f"call {rid}: {decision}"

    def calls(scope: object, f: CallFilter) -> list[CallRow]:
        every = [
            CallRow(T, "files", "mcp__files__read", "pid 7 (host)", "ok", 3.5),
            CallRow(T, "mail", "mcp__mail__send", "pid 8 (host)", "refused", None),
        ]
        return [c for c in every if f.server in (None, c.server)]

    sources = Sources(
        approvals=lambda scope: Waiting(
            [PendingApproval("a1", "mail", "mcp__mail__send", "pid 8 (host)", T, '{"to": "<x>"}')]
        ),
        decide=decide,
        held=lambda scope: Waiting(
            [HeldChange("files", "tool", "read", "its definition changed", "-old\n+new <b>", T)]
        ),
        calls=calls,
    )
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            http_api = daemon.agent_server.http
            http_api._page = Page(
                daemon, daemon.all_servers, daemon.agent_server.agents_kin
            )  # no sources: none of it drawn
            bearer = {"Authorization": f"Bearer {daemon.http_token()}"}
            plain = await http(port, "GET", "/", bearer)
            assert b'id="calls"' not in plain.body and b"approval" not in plain.body
            http_api._page = Page(
                daemon, daemon.all_servers, daemon.agent_server.agents_kin, sources
            )
            cookie, csrf = await session(port, daemon.socket_path)
            page = await http(port, "GET", "/?server=mail", {"Cookie": cookie})
            body = page.body
            assert b'data-waits="approval" data-id="a1"' in body
            assert b"{&quot;to&quot;: &quot;&lt;x&gt;&quot;}" in body  # escaped
            assert b'data-waits="change" data-server="files"' in body
            assert b"+new &lt;b&gt;" in body
            assert b'<section id="calls">' in body
            assert b"mcp__mail__send" in body and b"mcp__files__read" not in body
            own = f"http://127.0.0.1:{port}"
            done = await http(
                port,
                "POST",
                "/page/decide",
                {
                    "Cookie": cookie,
                    "Origin": own,
                    "X-Mcpd-Csrf": csrf,
                    "Accept": "application/json",
                },
                b"id=a1&decision=deny",
            )
            assert done.status == 200 and done.json() == {"message": "call a1: deny"}
            no_csrf = await http(
                port, "POST", "/page/decide", {"Cookie": cookie, "Origin": own},
                b"id=a1&decision=approve",
            )  # fmt: skip
            assert no_csrf.status == 403
            release = await http(
                port,
                "POST",
                "/page/release",
                {"Cookie": cookie, "Origin": own, "X-Mcpd-Csrf": csrf},
                b"server=files&kind=tool&name=read",
            )
            assert release.status == 404  # no release source: nothing of that kind here
    assert decided == [("a1", "deny")]


# Reads the page on the socket (argv[1]), then asks for a one-time code.
PEER_PAGE = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET / HTTP/1.0\\r\\nHost: mcpd\\r\\n\\r\\n")
page = b""
while chunk := s.recv(65536):
    page += chunk
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
req = {"jsonrpc": "2.0", "id": 1, "method": "mcpd/auth/dashboard", "params": {"_meta": meta}}
s.sendall(json.dumps(req).encode() + bytes([10]))
print(json.dumps({"page": page.decode(), "code": json.loads(s.recv(65536).splitlines()[0])}))
"""


@needs_root
async def test_another_user_reads_the_page_of_its_profile_and_gets_no_code(
    tmp_path: Path,
) -> None:
    uid = peer_uid()
    shared = shared_dir()
    cfg = make_config(
        tmp_path,
        {"files": scripted_server(), "mail": scripted_server(), "broken": BROKEN},
        profiles={"default": {"servers": ["mail"]}},
        **socket_open_to(uid, shared),
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        backoff_base=30.0,
        backoff_cap=30.0,
    )
    try:
        with trio.fail_after(LIMIT):
            async with running(cfg) as daemon:
                out = json.loads(await run_as(uid, PEER_PAGE, daemon.socket_path))
                assert rows(out["page"].encode()) == {"mail": "ready"}
                assert "broken" not in out["page"] and str(tmp_path) not in out["page"]
                assert out["code"]["error"]["message"] == (
                    "mcpd/auth/dashboard is only for the daemon's user and root"
                )
                # The owner reads every server on the same socket.
                assert set(rows((await curl(daemon.socket_path, "/")).body)) == {
                    "broken",
                    "files",
                    "mail",
                }
    finally:
        shutil.rmtree(shared)
