"""mcpd's OAuth client end to end against an OAuth implementation nobody here wrote:
the official Python SDK's authorization server routes, resource metadata and bearer
middleware (``servers/sdk_oauth_server.py``; only its in-memory storage is ours).

One story, told once for the module (a login takes a real browser round trip and
tokens take real time to expire), with a scripted browser standing in for the
person: a configured ``url`` with no auth table needs a login; ``mcpd auth login``
(the command, as a process) brings it to ready; calls keep working across several
token lifetimes and after an idle spell past expiry, with refreshes and no failed
call; the provider revoking mcpd's grant makes the server ``needs_login`` with the
command in the call result; a second ``mcpd auth login`` brings it back (with the
same client registration); a restarted daemon still holds the tokens, in a 0600 file.
Everything mcpd printed or logged meanwhile (log lines, journal entries, status,
metrics, tool lists, call results, the commands' output) is kept and searched for
every token and secret the provider issued.
"""

from __future__ import annotations

import array
import contextlib
import io
import json
import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.local.service.journal import JournalHandler, LineHandler
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.hosts.peers import SERVERS
from tests.support.hosts.wiretap import free_port, serve

pytestmark = pytest.mark.interop

SDK_OAUTH = SERVERS / "sdk_oauth_server.py"
BROWSER = Path(__file__).resolve().parents[1] / "support" / "oauth" / "scripted_browser.py"
TTL = 2  # seconds an access token lives at the provider
TOOL = "mcp__sdk__whoami"


class Story:
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        self.outputs: list[tuple[str, str]] = []  # (where, text) of everything mcpd said

    def keep(self, where: str, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        self.outputs.append((where, text))


class Journal:
    """A stand-in for journald's socket that keeps every entry's bytes."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "journal")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.entries: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        size = array.array("i").itemsize
        while not self._stop.is_set():
            try:
                data, ancillary, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(size))
            except TimeoutError:
                continue
            for _, _, payload in ancillary:  # a big entry comes as a memfd
                fd = array.array("i", payload[:size])[0]
                data += os.pread(fd, os.fstat(fd).st_size, 0)
                os.close(fd)
            self.entries.append(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@contextlib.contextmanager
def captured_logs(story: Story) -> Iterator[None]:
    """Every record at every level, as log lines and as journal entries."""
    root = logging.getLogger()
    lines = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="mcpd-journal-") as directory:
        journal = Journal(directory)
        handlers = [LineHandler(lines), JournalHandler(journal.path)]
        level = root.level
        root.setLevel(logging.DEBUG)
        for h in handlers:
            root.addHandler(h)
        try:
            yield
        finally:
            for h in handlers:
                root.removeHandler(h)
                h.close()
            root.setLevel(level)
            journal.close()
            story.keep("log lines", lines.getvalue())
            for entry in journal.entries:
                story.keep("journal", entry)
            story.seen["journal_entries"] = len(journal.entries)


async def mcpd(story: Story, socket_path: str, *argv: str) -> tuple[int, str]:
    """An ``mcpd`` command as a person runs it (the browser is the scripted one)."""
    env = {**os.environ, "BROWSER": f"{sys.executable} {BROWSER}"}
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", socket_path],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
    )
    said = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    story.keep(f"mcpd {' '.join(argv)}", said)
    return proc.returncode, said


async def http_get(socket_path: str, path: str) -> bytes:
    stream = await trio.open_unix_socket(socket_path)
    async with stream:
        head = f"GET {path} HTTP/1.1\r\nHost: mcpd\r\nConnection: close\r\n\r\n"
        await stream.send_all(head.encode())
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


def provider(port: int, path: str, method: str = "GET") -> Any:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


async def call(story: Story, agent: Agent) -> dict[str, Any]:
    result = await agent.call(TOOL)
    story.keep("call result", json.dumps(result))
    return result


async def everything_shown(story: Story, agent: Agent, socket_path: str) -> None:
    """Every place mcpd shows its state: the commands, the socket's HTTP, the agent API."""
    commands = [["status"], ["status", "--json"], ["auth", "status"], ["tools", "--json"]]
    commands.append(["auth", "status", "--json"])
    for argv in commands:
        await mcpd(story, socket_path, *argv)
    for path in ("/status", "/metrics", "/healthz", "/tools"):
        story.keep(f"GET {path}", await http_get(socket_path, path))
    story.keep("mcpd/status", json.dumps(await agent.result("mcpd/status")))
    story.keep("mcpd/auth/status", json.dumps(await agent.result("mcpd/auth/status")))
    story.keep("tools/list", json.dumps(await agent.tools()))


async def state_of(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def tell(tmp: Path) -> Story:
    story = Story()
    seen = story.seen
    port = free_port()
    argv = [sys.executable, str(SDK_OAUTH), str(port), "--ttl", str(TTL)]
    async with serve(argv, port):
        url = f"http://127.0.0.1:{port}/mcp"
        # As `mcpd import` leaves an HTTP server: a url, nothing about OAuth.
        config = make_config(
            tmp, {"sdk": {"url": url}}, state_dir=str(tmp / "state"), health_interval=0
        )
        with captured_logs(story):
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                sock = daemon.socket_path
                seen["first"] = await state_of(agent)
                seen["login"] = await mcpd(story, sock, "auth", "login", "sdk")
                seen["after_login"] = await state_of(agent)
                steady = []
                until = trio.current_time() + 2.5 * TTL
                while trio.current_time() < until:  # calls through several token lifetimes
                    steady.append(await call(story, agent))
                    await trio.sleep(0.05)
                seen["steady"] = steady
                seen["grants_steady"] = provider(port, "/test/tokens")["grants"]
                await trio.sleep(TTL + 0.5)  # idle until the token has expired
                seen["after_idle"] = await call(story, agent)
                seen["grants_idle"] = provider(port, "/test/tokens")["grants"]
                await everything_shown(story, agent, sock)
                provider(port, "/test/revoke", "POST")  # the user withdraws mcpd's access
                seen["revoked"] = await call(story, agent)
                seen["revoked_state"] = await state_of(agent)
                seen["revoked_again"] = await call(story, agent)
                await everything_shown(story, agent, sock)
                seen["relogin"] = await mcpd(story, sock, "auth", "login", "sdk")
                seen["after_relogin"] = await call(story, agent)
            token_file = tmp / "state" / "oauth" / "sdk.json"
            seen["file_mode"] = stat.S_IMODE(os.stat(token_file).st_mode)
            seen["token_file"] = token_file.read_text()  # where tokens belong (not an output)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                seen["restarted"] = await state_of(agent)
                seen["after_restart"] = await call(story, agent)
                await everything_shown(story, agent, daemon.socket_path)
                seen["logout"] = await mcpd(story, daemon.socket_path, "auth", "logout", "sdk")
        story.keep("state file", (tmp / "state" / "registry.json").read_bytes())
        tokens = provider(port, "/test/tokens")
        seen["issued"] = tokens["issued"]
        seen["secrets"] = tokens["secrets"]
        seen["clients"] = tokens["clients"]
        seen["grants"] = tokens["grants"]
    return story


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    tmp = tmp_path_factory.mktemp("sdk-oauth")

    async def bounded() -> Story:
        with trio.fail_after(90):
            return await tell(tmp)

    return trio.run(bounded)


def text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


def test_a_url_server_needs_a_login_and_mcpd_auth_login_gives_it_one(story: Story) -> None:
    seen = story.seen
    assert seen["first"]["state"] == "needs_login"
    assert seen["first"]["last_error"] == "the server asks for a login; run `mcpd auth login sdk`"
    code, said = seen["login"]
    assert code == 0, said
    assert "To log in to sdk, open this address in a browser:" in said
    assert said.rstrip().endswith("sdk: logged in; ready with 1 tools")
    assert seen["after_login"]["state"] == "ready"


def test_tokens_are_refreshed_without_a_call_failing(story: Story) -> None:
    seen = story.seen
    steady = seen["steady"]
    assert len(steady) >= 20
    assert [text(r) for r in steady] == ["authorized"] * len(steady)
    # Two and a half token lifetimes of calls took at least two refreshes ...
    assert seen["grants_steady"]["refresh_token"] >= 2
    # ... and after an idle spell past the expiry, the call refreshed first.
    assert text(seen["after_idle"]) == "authorized"
    assert seen["grants_idle"]["refresh_token"] > seen["grants_steady"]["refresh_token"]


def test_a_revoked_grant_is_needs_login_until_the_next_login(story: Story) -> None:
    seen = story.seen
    for result in (seen["revoked"], seen["revoked_again"]):
        assert result["isError"] is True
        assert result["_meta"]["mcpd/outage"]["state"] == "needs_login"
        assert text(result).startswith(
            "The tool server 'sdk' is unavailable (needs_login): the authorization server no "
            "longer accepts mcpd's refresh token (it was revoked or expired); run `mcpd auth "
            "login sdk`."
        )
    state = seen["revoked_state"]
    assert state["state"] == "needs_login" and state["breaker"]["failures"] == 0
    code, said = seen["relogin"]
    assert code == 0, said
    assert text(seen["after_relogin"]) == "authorized"
    assert seen["clients"] == 1  # the second login used the same registration
    assert seen["grants"]["authorization_code"] == 2


def test_a_restart_keeps_the_tokens_in_a_private_file(story: Story) -> None:
    seen = story.seen
    assert seen["file_mode"] == 0o600
    assert seen["restarted"]["state"] == "ready"
    assert text(seen["after_restart"]) == "authorized"
    assert seen["grants"]["authorization_code"] == 2  # no login after the restart
    # The SDK's revocation endpoint wants client_secret in the body even from a client
    # that authenticates with Basic (mcpd's choice), so it refuses; mcpd says so and
    # forgets the tokens all the same, naming those left valid.
    code, said = seen["logout"]
    assert code == 0 and said.startswith("sdk: logged out; revoking the tokens failed: "), said
    assert said.rstrip().endswith(
        "; the refresh token and the access token stay valid at the authorization server "
        "until they expire"
    ), said


def test_no_token_or_secret_appears_in_anything_mcpd_showed(story: Story) -> None:
    seen = story.seen
    secrets_issued = [*seen["issued"], *seen["secrets"]]
    # The search has something to find, and would find it: the token file holds some.
    assert len(seen["issued"]) >= 8 and seen["secrets"]
    assert any(value in seen["token_file"] for value in secrets_issued)
    assert seen["journal_entries"] > 10 and len(story.outputs) > 40
    found = [
        (where, value[:6] + "…")
        for where, output in story.outputs
        for value in secrets_issued
        if value in output
    ]
    assert found == []
