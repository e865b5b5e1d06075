"""The ``mcpd/auth/...`` socket methods called directly, each from the callers an
agent connection can have: the daemon's user and root on the socket may log in, out
and into the dashboard; another user, a server's own process, a peer whose process
cannot be told, and an agent on the HTTP endpoint (which has the endpoint's token, and
no peer) may not, and learn nothing from trying. Anyone may see the logins' state, of
its profile's servers only; no answer carries the endpoint's token."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest
from msgspec import Raw

from mcpd.agents.agent import Agent
from mcpd.agents.agent_server import new_session
from mcpd.agents.entry.identity import AgentIdentity
from mcpd.agents.entry.peers import Peer
from mcpd.agents.http.exchange import Exchange, RequestSender
from mcpd.agents.http.tcp import Connect
from mcpd.agents.own_methods.auth_methods import HANDLERS
from mcpd.agents.page.passes import CODE_TTL, Passes
from mcpd.policy.deciders.kin import AgentKin, Process
from mcpd.servers.shared import AgentKey, LoggedOut, LoginBegun, LoginDone
from protocol.jsonrpc import messages as rpc
from tests.support.parts.routing import World

TOKEN = "endpoint-token-kept-secret"
ME = os.getuid()
OTHER = 54_321
OWNER_ONLY = ("mcpd/auth/login", "mcpd/auth/complete", "mcpd/auth/logout", "mcpd/auth/dashboard")
PARAMS: dict[str, dict[str, Any]] = {
    "mcpd/auth/login": {"server": "web", "redirect_uri": "http://127.0.0.1:4711/callback"},
    "mcpd/auth/complete": {"server": "web", "login": "l-1", "redirect": "http://x/?code=c"},
    "mcpd/auth/logout": {"server": "web"},
    "mcpd/auth/dashboard": {},
}


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The daemon's runtime directory, where it makes the directory of pages."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path


class Logins:
    """The daemon's logins, as far as the methods reach them: what each was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[Any, ...]]] = []
        self.rows: list[dict[str, object]] = [
            {"server": "web", "state": "logged_in"},
            {"server": "hidden", "state": "none"},
        ]

    def status(self, only: Any = None) -> list[dict[str, object]]:
        self.asked.append(("status", ()))
        return [r for r in self.rows if only is None or only(r["server"])]

    async def unconfigured(self) -> list[str]:
        return ["removed"]

    async def begin(self, alias: str, redirect_uri: str | None) -> LoginBegun | LoginDone:
        self.asked.append(("begin", (alias, redirect_uri)))
        if redirect_uri is None:
            return LoginDone(server=alias, state="ready", tools=1)
        return LoginBegun(server=alias, url="https://auth.example.com/authorize?x", login="l-1")

    async def finish(self, alias: str, login_id: str, redirect: str) -> LoginDone:
        self.asked.append(("finish", (alias, login_id, redirect)))
        return LoginDone(server=alias, state="ready", tools=1, refreshable=False, expires_at=None)

    async def logout(self, alias: str, *, forget_client: bool = False) -> LoggedOut:
        self.asked.append(("logout", (alias, forget_client)))
        return LoggedOut(
            server=alias, had_tokens=True, revoked=[], not_revocable=[], problem=None, unrevoked=[]
        )


class Control:
    def __init__(self) -> None:
        self.logins = Logins()


class Page:
    def __init__(self) -> None:
        self.passes = Passes(lambda: TOKEN)


class Http:
    def __init__(self) -> None:
        self.page = Page()


class Scope:
    """A profile's view of the servers, as far as status needs it."""

    def __init__(self, *aliases: str) -> None:
        self.aliases = aliases

    def has_server(self, alias: str) -> bool:
        return alias in self.aliases


class Api:
    def __init__(self, endpoint: Connect | None = None, scope: Scope | None = None) -> None:
        self.control = Control()
        self.endpoint = endpoint
        self.http = Http()
        self.scope = scope

    def scope_of(self, conn: Agent) -> Scope | None:
        return self.scope

    async def agents_kin(self) -> list[AgentKin]:
        return []  # no agent is connected


def caller(peer: Peer | None) -> Agent:
    """An agent of ``peer``: an HTTP exchange, as on the socket (a peer the
    kernel named) or on the TCP endpoint (None: no peer, only the token)."""
    world = World()
    return Exchange(
        new_session(),
        RequestSender(peer),
        world.profile,
        AgentKey(),
        AgentIdentity(peer),
    )


def peer(uid: int = ME, **more: Any) -> Peer:
    return Peer(
        pid=4242, uid=uid, gid=uid, lineage=(Process(4242), Process(1)), session=4242, **more
    )


async def call(api: Api, conn: Agent, method: str, params: Any = None) -> Any:
    """The method's answer as the caller reads it, its keys in the order sent."""
    raw = Raw(json.dumps(params if params is not None else PARAMS.get(method, {})).encode())
    said = await HANDLERS[method](api, conn, rpc.Request(1, method, raw), None)
    return json.loads(msgspec.json.encode(said))


NOT_OWNERS = {
    "another user": peer(OTHER),
    "a server's process": peer(ME, server="notes"),
    "root's server's process": peer(0, server="notes"),
    "an unverified peer": peer(ME, unverified=True),
    "the HTTP endpoint": None,
}


@pytest.mark.parametrize("method", OWNER_ONLY)
@pytest.mark.parametrize("who", sorted(NOT_OWNERS))
async def test_only_the_daemons_user_on_its_socket_may_log_in_or_out(who: str, method: str) -> None:
    api = Api(Connect("127.0.0.1", 8765))
    with pytest.raises(rpc.RPCError) as info:
        await call(api, caller(NOT_OWNERS[who]), method)
    assert (info.value.code, info.value.message) == (
        -32000,
        f"{method} is only for the daemon's user and root",
    )
    assert api.control.logins.asked == []


@pytest.mark.parametrize("who", sorted(NOT_OWNERS))
async def test_a_caller_refused_learns_nothing_of_the_params_it_got_wrong(who: str) -> None:
    with pytest.raises(rpc.RPCError, match="only for the daemon's user"):
        await call(Api(), caller(NOT_OWNERS[who]), "mcpd/auth/login", {"nope": 1})


@pytest.mark.parametrize("uid", [ME, 0])
async def test_the_daemons_user_and_root_reach_the_logins(uid: int) -> None:
    api = Api()
    conn = caller(peer(uid))
    begun = await call(api, conn, "mcpd/auth/login")
    assert [*begun] == ["server", "url", "login", "pages"] and begun["login"] == "l-1"
    done = await call(api, conn, "mcpd/auth/complete")
    assert json.dumps(done) == (
        '{"server": "web", "state": "ready", "tools": 1, "refreshable": false, "expires_at": null}'
    )
    assert (await call(api, conn, "mcpd/auth/logout"))["had_tokens"] is True
    await call(api, conn, "mcpd/auth/logout", {"server": "web", "forget_client": True})
    await call(api, conn, "mcpd/auth/login", {"server": "robot"})
    assert api.control.logins.asked == [
        ("begin", ("web", "http://127.0.0.1:4711/callback")),
        ("finish", ("web", "l-1", "http://x/?code=c")),
        ("logout", ("web", False)),
        ("logout", ("web", True)),
        ("begin", ("robot", None)),
    ]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("mcpd/auth/login", {}),
        ("mcpd/auth/login", {"server": 5}),
        ("mcpd/auth/login", {"server": "web", "redirect_uri": ["x"]}),
        ("mcpd/auth/complete", {"server": "web", "login": "l-1"}),
        ("mcpd/auth/logout", ["web"]),
        ("mcpd/auth/logout", {"server": "web", "forget_client": "yes"}),
    ],
)
async def test_the_owners_malformed_params_are_invalid_params(method: str, params: Any) -> None:
    api = Api()
    with pytest.raises(rpc.InvalidParams):
        await call(api, caller(peer()), method, params)
    assert api.control.logins.asked == []


async def test_anyone_who_may_use_the_socket_sees_the_state_of_their_profiles_servers() -> None:
    api = Api(scope=Scope("web"))
    for conn in (caller(peer(OTHER)), caller(None), caller(peer(ME, server="notes"))):
        said = await call(api, conn, "mcpd/auth/status")
        assert said == {"servers": [{"server": "web", "state": "logged_in"}]}
    api.scope = None  # a caller the status of every server is for
    said = await call(api, caller(peer()), "mcpd/auth/status")
    assert [r["server"] for r in said["servers"]] == ["web", "hidden"]
    # Saved logins of servers no longer configured: named to that caller alone.
    assert said["unconfigured"] == ["removed"]


@pytest.mark.parametrize(
    ("host", "reached"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "127.0.0.1"),
        ("::", "[::1]"),
        ("::1", "[::1]"),
        ("192.0.2.7", "192.0.2.7"),
    ],
)
async def test_the_dashboard_address_carries_a_new_one_time_code_never_the_token(
    host: str, reached: str
) -> None:
    api = Api(Connect(host, 8765))
    conn = caller(peer())
    first = await call(api, conn, "mcpd/auth/dashboard")
    second = await call(api, conn, "mcpd/auth/dashboard")
    assert first["expires_in"] == CODE_TTL
    url = urlsplit(first["url"])
    assert (url.scheme, url.netloc, url.path) == ("http", f"{reached}:8765", "/")
    (code,) = parse_qs(url.query)["code"]
    assert code != parse_qs(urlsplit(second["url"]).query)["code"][0]
    assert TOKEN not in msgspec.json.encode([first, second]).decode()
    assert api.http.page.passes.redeem(code, os.getuid()) is not None
    assert api.http.page.passes.redeem(code, os.getuid()) is None  # once


async def test_without_an_http_endpoint_the_dashboard_has_no_address() -> None:
    assert await call(Api(), caller(peer()), "mcpd/auth/dashboard") == {"url": None}


@pytest.mark.parametrize("method", ["mcpd/auth/dashboard", "mcpd/auth/login"])
async def test_a_page_for_a_browser_goes_where_the_daemon_hides_it(
    method: str, runtime: Path
) -> None:
    """Its own runtime directory's, made private, whatever the command's environment
    says: the command cannot know which directory the daemon hides from servers."""
    out = await call(Api(Connect("127.0.0.1", 8765)), caller(peer()), method, PARAMS[method])
    pages = runtime / "mcpd-pages"
    assert out["pages"] == str(pages)
    assert stat.S_IMODE(pages.stat().st_mode) == 0o700
