"""One HTTP server's authorization (``ServerAuth``) and login (``Login``) in process,
with the authorization server a ``FakeWorld``: every request mcpd's OAuth client makes
is answered by it (no sockets), under a clock the test moves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpd.config.loading.load import parse_config
from mcpd.local.state.oauth_store import OAuthStore
from mcpd.servers.oauth.auth import ServerAuth
from mcpd.servers.oauth.login import Login
from protocol.oauth import FetchPolicy, HttpRequest, HttpResponse
from protocol.oauth.ssrf import parse_address
from tests.support.oauth.fake import FakeWorld
from transports.errors import AuthError, TransportError
from transports.http.oauth_client import OAuthHttp, Resolver

REDIRECT = "http://127.0.0.1:4711/callback"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def public(host: str, port: int) -> list[str]:
    """Every name is at one public address; an address is itself."""
    return [host] if parse_address(host) is not None else ["93.184.216.34"]


class WorldHttp(OAuthHttp):
    """mcpd's OAuth client with the world answering (after the policy's checks, of the
    URL and of where ``resolver`` says its host is): ``down`` makes every request fail
    as an unreachable authorization server would."""

    def __init__(self, world: FakeWorld, clock: Clock, resolver: Resolver = public) -> None:
        super().__init__(label="srv: authorization", resolver=resolver, clock=clock)
        self.world = world
        self.resolver = resolver
        self.down = False

    async def execute(self, request: HttpRequest, policy: FetchPolicy) -> HttpResponse:
        u = policy.check_url(request.url, request.purpose)
        addresses = await self.resolver(u.host, u.port)
        policy.check_addresses(request.url, addresses, request.purpose)
        if self.down:
            raise TransportError(f"{request.purpose}: connection refused")
        return self.world.handle(request)


def server_auth(
    state: Path, world: FakeWorld, clock: Clock, resolver: Resolver = public, **server: Any
) -> tuple[ServerAuth, WorldHttp]:
    """``srv`` at the world's server URL, ``server`` its other config keys."""
    config = parse_config({"servers": {"srv": {"url": world.server_url, **server}}}, env={})
    http = WorldHttp(world, clock, resolver)
    auth = ServerAuth("srv", config.servers["srv"], OAuthStore(str(state)), http=http, clock=clock)
    return auth, http


async def log_in(login: Login, world: FakeWorld) -> None:
    """A person's login: begun, approved in the world's browser, finished."""
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    await login.finish(login_id, world.authorize(url))


def unauthorized(challenge: str = "", peer: str | None = None) -> AuthError:
    """A 401, sent from ``peer`` (None: not known)."""
    return AuthError("HTTP 401", status=401, challenge=challenge, peer=peer)


def forbidden(challenge: str) -> AuthError:
    return AuthError("HTTP 403", status=403, challenge=challenge)
