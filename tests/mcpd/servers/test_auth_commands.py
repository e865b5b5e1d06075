"""``mcpd auth``'s side in the daemon, called directly on running servers whose
authorization server is a ``FakeWorld``: which servers can be logged in to and what is
said of the others, that a login answers once its server has used it (connected, or
down with the reason), that a redirect which is not the login's leaves it waiting, that
logging out holds the server for a login, and that no answer carries a token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
import trio
import trio.testing

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.login_answers import LoginBegun, LoginDone
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.auth_commands import REFUSED, Logins
from mcpd.servers.life.runner import Runner
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, WorldHttp
from tests.support.parts.stand_in import StandIn
from transports.base import AuthHook, NotificationHandler, Transport
from transports.errors import AuthError, TransportClosed

SECRET = "s3cret"
MACHINE = {"type": "client_credentials", "client_id": "machine", "client_secret": SECRET}


class Listing(StandIn):
    """A legacy server listing one tool."""

    def answer(self, method: str, params: Any) -> Any:
        if method == "initialize":
            return {"protocolVersion": mcp.LATEST_LEGACY, "capabilities": {"tools": {}}}
        if method == "tools/list":
            return {"tools": [{"name": "search"}]}
        return super().answer(method, params)


class Servers:
    """The transport factory: an HTTP server with OAuth answers 401 (with its challenge)
    to a request without a token, and mcpd's authorization is asked as the HTTP
    transport asks it; ``refusing`` servers cannot be reached at all."""

    def __init__(self, worlds: dict[str, FakeWorld]) -> None:
        self.worlds = worlds
        self.servers: dict[str, ServerParts] = {}
        self.refusing: set[str] = set()

    @contextlib.asynccontextmanager
    async def __call__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        on: NotificationHandler,
        auth: AuthHook | None,
    ) -> AsyncIterator[Transport]:
        if alias in self.refusing:
            raise TransportClosed(f"{alias}: connection refused")
        auth = self.servers[alias].auth
        if auth is not None and auth.enabled and await auth.authorization() is None:
            challenge = f'Bearer resource_metadata="{self.worlds[alias].prm_url}"'
            refusal = AuthError("HTTP 401", status=401, challenge=challenge)
            if await auth.refused(refusal, None) is None:
                raise refusal
        yield cast(Transport, Listing())


class Daemon:
    def __init__(self, sup: Supervisor, servers: Servers, worlds: dict[str, FakeWorld]) -> None:
        self.sup = sup
        self.servers = servers
        self.world = worlds["web"]  # a person's login
        self.robot = worlds["robot"]  # a machine identity's
        self.logins = Logins(sup)

    def server(self, alias: str) -> ServerParts:
        return self.sup.servers[alias]


def robot_world() -> FakeWorld:
    world = FakeWorld(
        server_url="https://robot.example.com/mcp",
        issuer="https://robot-auth.example.com",
        prm_url="https://robot.example.com/.well-known/oauth-protected-resource/mcp",
    )
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    return world


def config(tmp: Path, worlds: dict[str, FakeWorld]) -> Config:
    return parse_config(
        {
            "daemon": {"state_dir": str(tmp), "startup_deadline": 30},
            "servers": {
                "web": {"url": worlds["web"].server_url},
                "robot": {"url": worlds["robot"].server_url, "auth": MACHINE},
                "keyed": {
                    "url": "https://keyed.example.com/mcp",
                    "headers": {"Authorization": "Bearer mine"},
                },
                "notes": {"command": "srv"},
            },
        },
        env={},
    )


@contextlib.asynccontextmanager
async def daemon(tmp: Path, *, start: bool = True) -> AsyncIterator[Daemon]:
    """The four servers' runners, running (unless ``start`` is False) under one
    supervisor, each OAuth client asking the fake world."""
    worlds = {"web": FakeWorld(), "robot": robot_world()}
    clock = Clock()
    cfg = config(tmp, worlds)
    catalog = Catalog(cfg.naming)
    servers = Servers(worlds)
    sup = Supervisor(cfg, catalog, transport_factory=servers)
    runners = []
    for alias, server in cfg.servers.items():
        parts = ServerParts(alias, server, cfg, catalog, sup.on_change, guard=sup.guard)
        runners.append(Runner(parts, servers))
        if parts.auth is not None:
            parts.auth.http = WorldHttp(worlds.get(alias, worlds["web"]), clock)
            parts.auth.clock = clock
        sup.servers[alias] = servers.servers[alias] = parts
    async with trio.open_nursery() as nursery:
        if start:
            for runner in runners:
                nursery.start_soon(runner.run)
            for parts in sup.servers.values():
                await parts.first_attempt.wait()
        yield Daemon(sup, servers, worlds)
        nursery.cancel_scope.cancel()


@contextlib.contextmanager
def refused(match: str) -> Iterator[pytest.ExceptionInfo[rpc.RPCError]]:
    with pytest.raises(rpc.RPCError, match=match) as caught:
        yield caught
    assert caught.value.code == REFUSED


def printable(text: str) -> bool:
    return all(c.isprintable() for c in text)


async def test_only_a_running_http_server_with_oauth_can_be_logged_in_to(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        asked = len(d.world.requests), len(d.robot.requests)
        for call in (
            lambda alias: d.logins.begin(alias, REDIRECT),
            lambda alias: d.logins.finish(alias, "login-1", f"{REDIRECT}?code=c&state=s"),
            d.logins.logout,
        ):
            with refused(
                r"no server named 'nope' is running \(servers: keyed, notes, robot, web\)"
            ):
                await call("nope")
            with refused("notes is a stdio server; logins are for HTTP servers"):
                await call("notes")
            with refused("keyed sends the Authorization header from the configuration"):
                await call("keyed")
        assert (len(d.world.requests), len(d.robot.requests)) == asked


async def test_a_refusal_quotes_an_unknown_name_without_its_control_characters(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        with refused("no server named") as caught:
            await d.logins.begin("\x1b[2Jweb\nnotes: connected", REDIRECT)
        assert printable(caught.value.message)
        d.sup.servers.clear()
        with refused(r"\(servers: none\)"):
            await d.logins.logout("web")


async def test_status_lists_the_oauth_servers_of_those_asked_for_with_their_state(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        rows = d.logins.status()
        assert [(r.server, r.server_state) for r in rows] == [
            ("robot", "ready"),
            ("web", "needs_login"),
        ]
        assert [r.server for r in d.logins.status(lambda alias: alias != "robot")] == ["web"]
        assert d.logins.status(lambda alias: False) == []
        assert b"at-1" not in msgspec.json.encode(rows)


_WHO = ("server", "type", "url", "issuer", "client_id", "logged_in")
_HELD = ("scopes", "expires_at", "expired", "refresh_token", "refreshable", "obtained_at")
_WHAT_NOW = ("needs_login", "redirect_port", "state", "login_pending")


async def test_a_login_row_is_said_key_by_key_as_the_oauth_package_says_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A login's row says its keys in one order, those of what its tokens hold only
    with tokens (robot), not without (web)."""
    async with daemon(tmp_path) as d:
        for alias, held in (("robot", list(_HELD)), ("web", [])):
            login = d.server(alias).login
            assert login is not None
            said = msgspec.json.decode(msgspec.json.encode(login.status()))
            assert list(said) == [*_WHO, *held, *_WHAT_NOW], alias
        (web,) = d.logins.status(lambda alias: alias == "web")
        assert list(msgspec.to_builtins(web))[-2:] == ["login_pending", "server_state"]
        assert "scopes" not in msgspec.to_builtins(web)


async def test_a_persons_login_answers_once_its_server_connected(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        begun = await d.logins.begin("web", REDIRECT)
        assert isinstance(begun, LoginBegun) and begun.server == "web"
        assert begun.url.startswith(d.world.metadata["authorization_endpoint"])
        (row,) = d.logins.status(lambda alias: alias == "web")
        assert row.login_pending is True and row.server_state == "needs_login"
        redirect = d.world.authorize(begun.url)
        done = await d.logins.finish("web", begun.login, redirect)
        assert msgspec.json.encode(done) == b'{"server":"web","state":"ready","tools":1}'
        (row,) = d.logins.status(lambda alias: alias == "web")
        assert row.state == "logged_in" and row.login_pending is False
        said = msgspec.json.encode([begun, done, d.logins.status()]).decode()
        assert "at-1" not in said and "rt-1" not in said


async def test_a_redirect_that_is_not_the_logins_leaves_it_waiting(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        begun = await d.logins.begin("web", REDIRECT)
        assert isinstance(begun, LoginBegun)
        login = begun.login
        with refused("web: that redirect does not carry this login's state") as caught:
            await d.logins.finish("web", login, f"{REDIRECT}?code=evil&state=guessed")
        # What ``mcpd auth login`` reads to keep waiting for the browser.
        assert caught.value.data == {"login": "waiting"}
        assert d.server("web").state == "needs_login"
        done = await d.logins.finish("web", login, d.world.authorize(begun.url))
        assert done.state == "ready"


async def test_a_login_no_longer_waiting_is_refused_as_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        begun = await d.logins.begin("web", REDIRECT)
        assert isinstance(begun, LoginBegun)
        redirect = d.world.authorize(begun.url)
        with refused("web: this login is no longer waiting") as caught:
            await d.logins.finish("web", "someone-elses", redirect)
        assert caught.value.data != {"login": "waiting"}
        with refused("web: a login needs a redirect URI"):
            await d.logins.begin("web", None)


async def test_a_machine_identity_logs_in_again_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        done = await d.logins.begin("robot", None)
        assert msgspec.json.encode(done) == b'{"server":"robot","state":"ready","tools":1}'
        assert len(d.robot.sent_to(d.robot.metadata["token_endpoint"])) == 2


async def test_a_refused_machine_identity_says_so_without_its_secret(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        d.robot.token_status, d.robot.token = 401, {"error": "invalid_client"}
        with refused("robot: the client credentials were refused") as caught:
            await d.logins.begin("robot", None)
        assert SECRET not in caught.value.message


async def test_a_login_whose_server_is_then_down_answers_with_the_reason(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        begun = await d.logins.begin("web", REDIRECT)
        assert isinstance(begun, LoginBegun)
        d.servers.refusing.add("web")
        done = await d.logins.finish("web", begun.login, d.world.authorize(begun.url))
        assert (done.server, done.tools) == ("web", 0)
        assert done.state != "ready" and "connection refused" in str(done.reason)


async def test_a_login_whose_server_never_tries_it_still_answers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The wait is bounded by the startup deadline, not by the server.
    async with daemon(tmp_path, start=False) as d:
        done = await d.logins.begin("robot", None)
        assert isinstance(done, LoginDone) and (done.server, done.state) == ("robot", "starting")


async def test_logging_out_revokes_and_holds_the_server_for_a_login(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with daemon(tmp_path) as d:
        begun = await d.logins.begin("web", REDIRECT)
        assert isinstance(begun, LoginBegun)
        await d.logins.finish("web", begun.login, d.world.authorize(begun.url))
        said = await d.logins.logout("web")
        assert msgspec.json.encode(said) == (
            b'{"server":"web","had_tokens":true,"revoked":["refresh_token","access_token"],'
            b'"not_revocable":[],"problem":null,"unrevoked":[],"forgot_client":false}'
        )
        await trio.testing.wait_all_tasks_blocked()
        assert d.server("web").state == "needs_login"
        assert msgspec.to_builtins(await d.logins.logout("web")) == {
            "server": "web",
            "had_tokens": False,
            "revoked": [],
            "not_revocable": [],
            "problem": None,
            "unrevoked": [],
            "forgot_client": False,
        }
