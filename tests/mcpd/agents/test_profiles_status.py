"""What status shows to whom, in a running daemon: an agent in a profile (by the
profile's socket, by ``mcpd/useProfile`` or by ``?profile=``) reads its own servers
only, in every view of the daemon (``mcpd status``, ``mcpd/status``, ``mcpd/auth/status``,
``/status``, ``/metrics``, ``/healthz``); the owner reads them all; and nobody reads the
user info or query string of a server's URL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.cli.on_socket import mcpd
from tests.support.clients.agent import connect, running
from tests.support.clients.daemon_http import CURL, curl, modern, modern_headers, post
from tests.support.system.peer_probe import PEER_PROBE
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir

LIMIT = 60

# The server the profile does not show: a stdio child that fails, saying why on stderr.
HIDDEN = "privy"
HIDDEN_STDERR = "privy-stderr-line"
# The one it shows: an HTTP server whose URL carries a key (credentials in its user
# info are a config error).
SHOWN = "webby"
SECRETS = ("s3cr3t", "apikey")
URL = "http://127.0.0.1:9/mcp/v1?apikey=s3cr3t&x=1#frag"
SHOWN_URL = "http://127.0.0.1:9/mcp/v1"


def write_config(tmp: Path, sock_dir: Path | None = None, extra: str = "") -> Path:
    """Two servers (and ``extra``), and the profile ``dev`` on its own socket showing
    one of them."""
    sock_dir = sock_dir or tmp
    path = tmp / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{sock_dir / "mcpd.sock"}"\nsocket_mode = "0666"\n'
        f'state_dir = "{tmp / "state"}"\n'
        # A slow retry keeps both servers down, with their reasons, for the whole test.
        "backoff_base = 30\nbackoff_cap = 60\nstartup_deadline = 20\n"
        f'[servers.{HIDDEN}]\ncommand = "/bin/sh"\n'
        f'args = ["-c", "echo {HIDDEN_STDERR} >&2; exit 3"]\n'
        f'[servers.{SHOWN}]\nurl = "{URL}"\n'
        f'[profiles.dev]\nservers = ["{SHOWN}"]\nsocket = "{sock_dir / "dev.sock"}"\n'
        'socket_mode = "0666"\n' + extra
    )
    return path


async def silent_port(nursery: trio.Nursery) -> int:
    """A port that takes connections and never answers on them."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")

    async def hold(stream: trio.SocketStream) -> None:
        async with stream:
            await trio.sleep_forever()

    nursery.start_soon(trio.serve_listeners, hold, listeners)
    return int(listeners[0].socket.getsockname()[1])


async def views(sock: Path, query: str = "") -> dict[str, str]:
    """Every way to read the daemon's status over ``sock``, as text."""
    out = {
        "mcpd status --json": await mcpd(sock, "status", "--json"),
        "mcpd status": await mcpd(sock, "status"),
        "mcpd auth status --json": await mcpd(sock, "auth", "status", "--json"),
    }
    for page in ("/status", "/metrics", "/healthz"):
        reply = await curl(str(sock), page + query)
        out[f"GET {page}{query}"] = reply.body.decode()
    return out


def assert_hides_secrets(texts: dict[str, str]) -> None:
    for where, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, f"{where} shows {secret!r}:\n{text}"


def assert_scoped(texts: dict[str, str], tmp: Path) -> None:
    """Only the profile's server, and none of the daemon's own paths."""
    for where, text in texts.items():
        for hidden in (HIDDEN, HIDDEN_STDERR, str(tmp / "mcpd.sock"), str(tmp / "mcpd.toml")):
            assert hidden not in text, f"{where} shows {hidden!r}:\n{text}"


def servers_of(status: dict[str, Any]) -> list[str]:
    return [s["alias"] for s in status["servers"]]


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_a_profile_socket_shows_its_own_servers_only(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    dev = tmp_path / "dev.sock"
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)):
            texts = await views(dev)
            assert_scoped(texts, tmp_path)
            assert_hides_secrets(texts)
            status = json.loads(texts["mcpd status --json"])
            assert servers_of(status) == [SHOWN]
            assert [p["name"] for p in status["profiles"]] == ["dev"]
            assert status["daemon"]["profile"] == "dev"
            assert status["servers"][0]["auth"]["url"] == SHOWN_URL
            assert "1 server: 1 unreachable" in status["daemon"]["summary"]
            logins = json.loads(texts["mcpd auth status --json"])["servers"]
            assert [(s["server"], s["url"]) for s in logins] == [(SHOWN, SHOWN_URL)]
            assert servers_of(json.loads(texts["GET /status"])) == [SHOWN]
            assert f'mcpd_server_up{{server="{SHOWN}"}} 0' in texts["GET /metrics"]
            health = json.loads(texts["GET /healthz"])
            assert [s["server"] for s in health["servers"]] == [SHOWN]
            # The line protocol on the profile's socket says the same.
            async with connect(str(dev)) as agent:
                status = await agent.result("mcpd/status")
                assert servers_of(status) == [SHOWN]
                assert HIDDEN not in json.dumps(status)
                auth = await agent.result("mcpd/auth/status")
                assert [s["server"] for s in auth["servers"]] == [SHOWN]
                profiles = await agent.result("mcpd/profiles")
                assert [p["name"] for p in profiles["profiles"]] == ["dev"]
            # And so does MCP over HTTP on it.
            reply = await post(str(dev), modern(1, "mcpd/status"), *modern_headers("mcpd/status"))
            assert servers_of(reply.json()["result"]) == [SHOWN]
            assert_scoped({"POST /mcp mcpd/status": reply.body.decode()}, tmp_path)


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_the_owner_sees_every_server_but_no_url_secret(tmp_path: Path) -> None:
    main = tmp_path / "mcpd.sock"
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            # A third server whose error names its URL: the stream there never opens.
            port = await silent_port(nursery)
            quiet = (
                f'[servers.quiet]\nurl = "http://127.0.0.1:{port}/sse?apikey=s3cr3t"\n'
                'transport = "sse"\nconnect_timeout = 0.5\n'
            )
            path = write_config(tmp_path, extra=quiet)
            async with running(load(path), str(path)):
                texts = await views(main)
            nursery.cancel_scope.cancel()
        assert_hides_secrets(texts)
        status = json.loads(texts["mcpd status --json"])
        rows = {s["alias"]: s for s in status["servers"]}
        assert (
            f'the event stream at "http://127.0.0.1:{port}/sse" did not open'
            in (rows["quiet"]["last_error"])
        )
        assert servers_of(status) == [HIDDEN, "quiet", SHOWN]
        assert {p["name"] for p in status["profiles"]} == {"default", "dev"}
        assert status["daemon"]["socket"] == str(main)
        assert status["daemon"]["config"] == str(path)
        assert rows[SHOWN]["auth"]["url"] == SHOWN_URL
        assert HIDDEN_STDERR in "".join(rows[HIDDEN]["stderr"])
        assert HIDDEN_STDERR in texts["mcpd status"]
        for page in ("GET /metrics", "GET /healthz"):
            assert HIDDEN in texts[page] and SHOWN in texts[page]


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_choosing_a_profile_on_the_daemon_socket_narrows_status(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    main = tmp_path / "mcpd.sock"
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)), connect(str(main)) as agent:
            texts = {}
            for page in ("/status", "/metrics", "/healthz"):
                texts[page] = (await curl(str(main), page + "?profile=dev")).body.decode()
            await agent.use_profile("dev")
            texts["mcpd/status"] = json.dumps(await agent.result("mcpd/status"))
            texts["mcpd/auth/status"] = json.dumps(await agent.result("mcpd/auth/status"))
            assert_scoped(texts, tmp_path)
            assert_hides_secrets(texts)
            assert servers_of(json.loads(texts["mcpd/status"])) == [SHOWN]
            assert servers_of(json.loads(texts["/status"])) == [SHOWN]


@needs_root
async def test_another_user_on_the_daemon_socket_sees_the_default_profile(
    tmp_path: Path,
) -> None:
    uid = peer_uid()
    shared = shared_dir()
    path = write_config(tmp_path, shared)
    path.write_text(
        path.read_text().replace(
            "[daemon]\n", f"[daemon]\nallow_uids = [{uid}]\n"
        ) + f'[profiles.default]\nservers = ["{SHOWN}"]\n'
    )  # fmt: skip
    try:
        with trio.fail_after(LIMIT):
            async with running(load(path), str(path)):
                requests = [("mcpd/status", {}), ("mcpd/auth/status", {}), ("mcpd/profiles", {})]
                out = await run_as(uid, PEER_PROBE, str(shared / "mcpd.sock"), json.dumps(requests))
                status, auth, profiles = (json.loads(line) for line in out.decode().splitlines())
                text = out.decode()
                for hidden in (HIDDEN, HIDDEN_STDERR, str(path), *SECRETS, "dev.sock"):
                    assert hidden not in text, f"{hidden!r} shown to another user:\n{text}"
                assert servers_of(status["result"]) == [SHOWN]
                assert status["result"]["daemon"]["profile"] == "default"
                assert [s["server"] for s in auth["result"]["servers"]] == [SHOWN]
                assert [p["name"] for p in profiles["result"]["profiles"]] == ["default"]
    finally:
        shutil.rmtree(shared)
