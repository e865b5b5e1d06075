"""``mcpd auth login`` with another local user watching: they can read every process's
command line and reach the loopback listener, so the login's address is never on a
command line, a connection of theirs to the listener is closed unanswered, and a
redirect with the login's state that does not log in does not end it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import trio

from mcpd.agents.entry.peers import peer_of
from protocol.oauth.http import get
from tests.support.clients.agent import connect, running
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.login import LIMIT, ROOT, config_for, read_until
from tests.support.oauth.protected_mcp import serve_protected
from tests.support.system.peer_user import needs_root, peer_uid, run_as
from transports.http.oauth_client import OAuthHttp

# As the user given: GET argv[1]; print the status it answered ("closed": none came).
SEND_AS = """
import http.client, sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
except (urllib.error.URLError, ConnectionError, http.client.RemoteDisconnected):
    print("closed")
"""

# As another user: what process argv[1]'s command line says, and whether the pages
# it names (file: addresses) can be read.
READ_ARGV_AS = """
import json, sys, urllib.parse
with open(f"/proc/{sys.argv[1]}/cmdline", "rb") as f:
    argv = [a.decode() for a in f.read().split(bytes(1)) if a]
pages = {}
for arg in argv:
    if arg.startswith("file:"):
        try:
            with open(urllib.parse.unquote(urllib.parse.urlsplit(arg).path)) as f:
                pages[arg] = f.read()
        except OSError as exc:
            pages[arg] = type(exc).__name__
print(json.dumps({"argv": argv, "pages": pages}))
"""

WAITS_ON = b"so mcpd waits on for another."


def without_browser() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("BROWSER", "DISPLAY")}


def their_redirect(url: str) -> str:
    """What someone who learnt the authorization address sends: its state, the
    issuer, and a code of their own."""
    query = parse_qs(urlsplit(url).query)
    issuer = urlsplit(url)._replace(path="", query="").geturl()
    answer = {"code": "attacker-code", "state": query["state"][0], "iss": issuer}
    return f"{query['redirect_uri'][0]}?{urlencode(answer)}"


async def start_login(socket_path: str, *extra: str, env: dict[str, str]) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcpd", "auth", "login", "t", *extra, "--socket", socket_path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
    )


def printed_url(seen: bytearray) -> str:
    lines = [line.strip() for line in seen.decode().splitlines()]
    return next(x for x in lines if x.startswith("http://") and "/authorize?" in x)


async def rest_of(proc: trio.Process, seen: bytearray) -> int:
    assert proc.stdout is not None
    while chunk := await proc.stdout.receive_some(4096):
        seen += chunk
    return await proc.wait()


@needs_root
async def test_a_redirect_with_the_state_and_a_bad_code_does_not_end_the_login(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            proc = await start_login(daemon.socket_path, "--no-browser", env=without_browser())
            assert proc.stdout is not None
            seen = bytearray()
            await read_until(proc.stdout, b"press Enter.", seen)
            url = printed_url(seen)
            # Another user is shut out; a program of the login's own user that learnt the
            # address is not told from the browser, and its redirect carries the state.
            said = await run_as(peer_uid(), SEND_AS, their_redirect(url))
            assert said.strip() == b"closed"
            said = await run_as(os.getuid(), SEND_AS, their_redirect(url))
            assert said.strip() == b"200"  # taken: it carries the state
            await read_until(proc.stdout, WAITS_ON, seen)
            assert b"invalid_grant" in seen and b"a new login is needed" not in seen
            http = OAuthHttp()
            policy = await http.policy_for(url)
            landed = await follow_authorization(http, url, policy)
            page = await http.execute(get(landed, "the browser"), policy)
            assert page.status == 200
            assert await rest_of(proc, seen) == 0, seen.decode()
            assert seen.decode().rstrip().endswith("t: logged in; ready with 1 tools")
            assert b"the login fails only if no good one comes by then" in seen
            assert srv.grants["authorization_code"] == 2  # theirs, refused; then the browser's
            async with connect(daemon.socket_path) as agent:
                result = await agent.call("mcp__t__whoami")
            assert result["content"][0]["text"] == "called with token #1"


@needs_root
async def test_when_only_a_bad_redirect_came_the_login_fails_at_its_deadline(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            proc = await start_login(
                daemon.socket_path, "--no-browser", "--timeout", "10", env=without_browser()
            )
            assert proc.stdout is not None
            seen = bytearray()
            await read_until(proc.stdout, b"press Enter.", seen)
            await run_as(os.getuid(), SEND_AS, their_redirect(printed_url(seen)))
            await read_until(proc.stdout, WAITS_ON, seen)
            assert await rest_of(proc, seen) == 1
    last = seen.decode().rstrip().splitlines()[-1]
    assert last.startswith("mcpd: the login failed: t: that redirect did not log in: ")
    assert "invalid_grant" in last


@needs_root
async def test_the_browser_is_not_told_the_address_on_its_command_line(
    tmp_path: Path,
) -> None:
    browser = ROOT / "tests" / "support" / "oauth" / "scripted_browser.py"
    hold = tmp_path / "hold.sock"
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            waiting = trio.socket.socket(socket.AF_UNIX)
            with waiting:
                await waiting.bind(str(hold))
                waiting.listen(1)
                env = {**without_browser(), "BROWSER": f"{sys.executable} {browser} --hold {hold}"}
                env.pop("XDG_RUNTIME_DIR", None)
                proc = await start_login(daemon.socket_path, env=env)
                held, _ = await waiting.accept()
                with held:
                    opener = peer_of(held)
                    assert opener is not None
                    seen = json.loads(await run_as(peer_uid(), READ_ARGV_AS, str(opener.pid)))
                    await held.send(b"go")
                assert await rest_of(proc, bytearray()) == 0
    argv: list[str] = seen["argv"]
    assert str(browser) in argv  # the other user does read the browser's command line
    assert not any("state=" in arg or "/authorize" in arg for arg in argv), argv
    (page,) = seen["pages"]
    assert seen["pages"][page] == "PermissionError"  # and cannot read the page it names
    assert not os.path.exists(urlsplit(page).path)  # gone once the login is over
    assert srv.grants["authorization_code"] == 1
