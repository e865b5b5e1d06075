"""``mcpd auth login|status|logout`` as a person runs them (real processes), against a
daemon whose server is a local protected MCP endpoint: the login over SSH with the
redirect pasted, the browser opened without a shell, and who may log in at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import trio

from mcpd.cli.logins.browser import browser_argv, safe_to_open
from protocol.oauth.http import get
from tests.support.clients.agent import connect, running
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.login import LIMIT, ROOT, config_for, mcpd, read_until
from tests.support.oauth.protected_mcp import serve_protected
from tests.support.system.peer_user import ONE_REQUEST, needs_root, peer_uid, run_as, shared_dir
from transports.http.oauth_client import OAuthHttp


async def test_over_ssh_the_redirect_is_pasted(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            env = {k: v for k, v in os.environ.items() if k not in ("BROWSER", "DISPLAY")}
            proc = await trio.lowlevel.open_process(
                [
                    sys.executable,
                    "-m",
                    "mcpd",
                    "auth",
                    "login",
                    "t",
                    "--socket",
                    daemon.socket_path,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
            assert proc.stdin is not None and proc.stdout is not None
            seen = bytearray()
            await read_until(proc.stdout, b"press Enter.", seen)
            url = next(
                line.strip()
                for line in seen.decode().splitlines()
                if line.strip().startswith("http://") and "/authorize?" in line
            )
            # The browser runs elsewhere: it ends at an address this machine never sees,
            # which the person copies from its address bar.
            http = OAuthHttp()
            landed = await follow_authorization(http, url, await http.policy_for(srv.mcp_url))
            await proc.stdin.send_all(b"http://example.com/not-it\n")
            await read_until(proc.stdout, b"that is not the address to paste", seen)
            elsewhere = landed.split("?")[0] + "?code=stolen&state=another-attempt"
            await proc.stdin.send_all(elsewhere.encode() + b"\n")
            await read_until(proc.stdout, b"is not the answer to this login", seen)
            await proc.stdin.send_all(landed.encode() + b"\n")
            while chunk := await proc.stdout.receive_some(4096):
                seen += chunk
            assert await proc.wait() == 0, seen.decode()
            assert seen.decode().rstrip().endswith("t: logged in; ready with 1 tools")
            async with connect(daemon.socket_path) as agent:
                result = await agent.call("mcp__t__whoami")
            assert result["content"][0]["text"] == "called with token #1"


async def test_a_stray_request_to_the_listener_does_not_end_the_login(tmp_path: Path) -> None:
    """Another local user can reach the loopback listener too: a redirect with another
    state, with none, or to another path gets an error page, and the login waits on
    for the browser's own redirect."""
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            env = {k: v for k, v in os.environ.items() if k not in ("BROWSER", "DISPLAY")}
            argv = [sys.executable, "-m", "mcpd", "auth", "login", "t", "--no-browser"]
            proc = await trio.lowlevel.open_process(
                [*argv, "--socket", daemon.socket_path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
            assert proc.stdout is not None
            seen = bytearray()
            await read_until(proc.stdout, b"press Enter.", seen)
            lines = [line.strip() for line in seen.decode().splitlines()]
            url = next(x for x in lines if x.startswith("http://") and "/authorize?" in x)
            callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
            http = OAuthHttp()
            policy = await http.policy_for(callback)
            for stray, status in [
                (f"{callback}?code=stolen&state=guessed", 400),
                (f"{callback}?code=stolen", 400),
                (f"{callback}?error=access_denied&state=guessed", 400),
                (callback.replace("/callback", "/other") + "?code=x&state=y", 404),
            ]:
                answer = await http.execute(get(stray, "a stray request"), policy)
                assert answer.status == status, (stray, answer.status)
            landed = await follow_authorization(http, url, policy)
            page = await http.execute(get(landed, "the browser"), policy)
            assert page.status == 200 and b"close this window" in page.body
            while chunk := await proc.stdout.receive_some(4096):
                seen += chunk
            assert await proc.wait() == 0, seen.decode()
    assert seen.decode().rstrip().endswith("t: logged in; ready with 1 tools")
    assert srv.grants["authorization_code"] == 1  # only the browser's code was redeemed


async def test_the_browser_opens_the_url_and_its_redirect_reaches_the_command(
    tmp_path: Path,
) -> None:
    browser = ROOT / "tests" / "support" / "oauth" / "scripted_browser.py"
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            sock = daemon.socket_path
            # The URL carries & and ?; a shell would have cut it (or run what follows).
            code, said = await mcpd(
                sock, "auth", "login", "t", env={"BROWSER": f"{sys.executable} {browser}"}
            )
            assert code == 0, said
            code, said = await mcpd(sock, "auth", "status")
            assert code == 0
            line = next(x for x in said.splitlines() if x.startswith("t "))
            assert line.split()[1] == "logged_in" and srv.base in line
            code, said = await mcpd(sock, "auth", "status", "--json")
            (entry,) = json.loads(said)["servers"]
            assert (entry["server"], entry["state"], entry["refreshable"]) == (
                "t",
                "logged_in",
                True,
            )
            code, said = await mcpd(sock, "auth", "logout", "t")
            assert (code, said.strip()) == (0, "t: logged out; the server revoked the tokens")
            assert len(srv.revoked) == 2  # the refresh token, then the access token
            code, said = await mcpd(sock, "auth", "status")
            assert "needs_login" in said and "logged out; run `mcpd auth login t`" in said


async def test_what_cannot_be_logged_in_to_says_why(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            sock = daemon.socket_path
            code, said = await mcpd(sock, "auth", "login", "nope")
            assert code == 1 and "no server named 'nope' is running" in said
            code, said = await mcpd(sock, "auth", "login", "notes")
            assert code == 1 and "notes is a stdio server; logins are for HTTP servers" in said
            code, said = await mcpd(sock, "auth", "logout", "nope")
            assert code == 1 and "no server named 'nope'" in said


def test_the_browser_command_is_an_argv_and_only_for_a_desktop(tmp_path: Path) -> None:
    url = "https://auth.example.com/authorize?a=1&b=$(reboot)"
    assert browser_argv(url, {}) is None  # a server, or SSH without a display
    assert browser_argv(url, {"BROWSER": "firefox --new-window"}) == [
        "firefox",
        "--new-window",
        url,
    ]
    opener = tmp_path / "xdg-open"
    opener.write_text("#!/bin/sh\n")
    opener.chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{tmp_path}:{old}"
    try:
        if sys.platform != "darwin":
            assert browser_argv(url, {"DISPLAY": ":0"}) == ["xdg-open", url]
            assert browser_argv(url, {"WAYLAND_DISPLAY": "wayland-0"}) == ["xdg-open", url]
    finally:
        os.environ["PATH"] = old
    assert safe_to_open(url)
    assert safe_to_open("http://127.0.0.1:8080/authorize")
    assert not safe_to_open("http://auth.example.com/authorize")
    assert not safe_to_open("javascript:alert(1)")
    assert not safe_to_open("file:///etc/passwd")


@needs_root
async def test_only_the_daemons_user_may_log_in_or_out(tmp_path: Path) -> None:
    uid = peer_uid()
    sock = shared_dir() / "mcpd.sock"

    async def as_user(method: str) -> dict[str, Any]:
        return json.loads(await run_as(uid, ONE_REQUEST, str(sock), method))  # type: ignore[no-any-return]

    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(
                tmp_path, srv, socket=str(sock), socket_mode="0666", allow_uids=[uid]
            )
            async with running(config):
                assert "servers" in (await as_user("mcpd/auth/status"))["result"]
                for method in ("mcpd/auth/login", "mcpd/auth/complete", "mcpd/auth/logout"):
                    denied = await as_user(method)
                    assert denied["error"]["message"] == (
                        f"{method} is only for the daemon's user and root"
                    )


async def test_the_tools_of_a_server_waiting_for_a_login_are_said_to_be_missing(
    tmp_path: Path,
) -> None:
    """``mcpd tools`` lists none of a server that waits for a login: under the table it
    says which, and the command that logs in, as ``mcpd status`` does."""
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            sock = daemon.socket_path
            code, said = await mcpd(sock, "tools")
            assert code == 0, said
            assert said.splitlines()[-1] == (
                "t waits for a login, so none of its tools is listed: mcpd auth login t"
            ), said
            code, said = await mcpd(sock, "tools", "--json")
            assert code == 0 and "waits for a login" not in said, said
