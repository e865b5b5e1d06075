"""What mcpd holds for one HTTP server's authorization and what it shows of it: the
state ``mcpd auth status`` reports, a saved login taken back only for its own URL,
a login that cannot be saved kept in memory, and whoever waits for a login woken."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import trustme

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.local.state.oauth_store import IssuerRecord, OAuthStore, StoredLogin
from mcpd.servers.oauth.errors import LoginRequired
from mcpd.servers.oauth.state import EXPIRING, AuthState, _tls
from protocol.oauth import (
    AuthorizationResult,
    AuthorizationServer,
    BearerChallenge,
    ClientRegistration,
    DiscoveryResult,
    Secret,
    TokenSet,
)
from protocol.oauth.metadata import ServerMetadata
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import Clock, WorldHttp

URL = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
NOW = 1_000_000.0


def server(url: str = URL, **keys: Any) -> ServerConfig:
    return parse_config({"servers": {"srv": {"url": url, **keys}}}, env={}).servers["srv"]


def state(tmp_path: Path, cfg: ServerConfig | None = None, clock: Clock | None = None) -> AuthState:
    clock = clock or Clock(NOW)
    return AuthState(
        "srv",
        cfg or server(),
        OAuthStore(str(tmp_path)),
        http=WorldHttp(FakeWorld(), clock),
        clock=clock,
    )


def tokens(
    access: str = "at-1", *, refresh: str | None = "rt-1", expires_at: float | None = NOW + 3600
) -> TokenSet:
    return TokenSet(
        Secret(access),
        expires_at=expires_at,
        refresh_token=None if refresh is None else Secret(refresh),
        issuer=ISSUER,
        obtained_at=NOW,
    )


def stored(url: str = URL, held: TokenSet | None = None) -> StoredLogin:
    registration = ClientRegistration(
        ISSUER, "client-1", redirect_uris=("http://127.0.0.1:4711/callback",)
    )
    return StoredLogin(
        server_url=url,
        issuer=ISSUER,
        issuers={ISSUER: IssuerRecord(registration=registration, tokens=held or tokens())},
    )


def result(held: TokenSet) -> AuthorizationResult:
    meta = ServerMetadata(issuer=ISSUER, token_endpoint=f"{ISSUER}/token")
    discovery = DiscoveryResult(URL, URL, AuthorizationServer(ISSUER, meta))
    return AuthorizationResult(held, ClientRegistration(ISSUER, "client-2"), discovery)


# -- what it is for --


@pytest.mark.parametrize(
    ("keys", "enabled", "kind"),
    [
        ({}, True, "oauth"),
        ({"headers": {"aUtHoRiZaTiOn": "Bearer mine"}}, False, "oauth"),
        ({"headers": {"X-Api-Key": "k"}}, True, "oauth"),
        (
            {"auth": {"type": "client_credentials", "client_id": "c", "client_secret": "s"}},
            True,
            "client_credentials",
        ),
    ],
)
def test_an_authorization_header_of_the_user_turns_oauth_off_unless_asked_for(
    tmp_path: Path, keys: dict[str, Any], enabled: bool, kind: str
) -> None:
    auth = state(tmp_path, server(**keys))
    assert (auth.enabled, auth.kind) == (enabled, kind)
    assert auth.status().type == (kind if enabled else "header")


@pytest.mark.parametrize(("era", "legacy"), [("auto", True), ("legacy", True), ("modern", False)])
def test_the_2025_03_26_stand_ins_are_for_servers_that_may_be_of_that_revision(
    tmp_path: Path, era: str, legacy: bool
) -> None:
    assert state(tmp_path, server(era=era)).allow_legacy is legacy


# -- what people see --


def test_a_server_that_never_asked_needs_no_login(tmp_path: Path) -> None:
    auth = state(tmp_path)
    status = auth.status()
    assert status.state == "no_login" and status.logged_in is False
    assert status.needs_login is None and status.redirect_port == 0
    auth.challenge = BearerChallenge()
    assert auth.status().state == "not_logged_in"
    assert state(tmp_path, server(auth={})).status().state == "not_logged_in"


async def test_the_state_follows_the_token_lifetime_when_it_cannot_be_renewed(
    tmp_path: Path,
) -> None:
    clock = Clock(NOW)
    await OAuthStore(str(tmp_path)).save("srv", stored(held=tokens(refresh=None)))
    auth = state(tmp_path, clock=clock)
    await auth.load()
    seen = []
    for at in (NOW, NOW + 3600 - EXPIRING - 1, NOW + 3600 - EXPIRING + 1, NOW + 3600):
        clock.now = at
        seen.append(auth.status().state)
    assert seen == ["logged_in", "logged_in", "expiring", "expired"]


@pytest.mark.parametrize(
    ("refresh", "keys"),
    [
        ("rt-1", {}),
        (
            None,
            {"auth": {"type": "client_credentials", "client_id": "client-1", "client_secret": "s"}},
        ),
    ],
)
async def test_a_token_that_renews_itself_stays_logged_in_past_its_expiry(
    tmp_path: Path, refresh: str | None, keys: dict[str, Any]
) -> None:
    clock = Clock(NOW)
    await OAuthStore(str(tmp_path)).save("srv", stored(held=tokens(refresh=refresh)))
    auth = state(tmp_path, server(**keys), clock)
    await auth.load()
    clock.now = NOW + 7200
    assert auth.status().state == "logged_in"


async def test_the_status_shows_no_token_and_no_secret_of_the_url(tmp_path: Path) -> None:
    url = "https://mcp.example.com/mcp?key=url-key#url-frag"
    await OAuthStore(str(tmp_path)).save("srv", stored(url))
    auth = state(tmp_path, server(url))
    await auth.load()
    status = auth.status()
    assert status.logged_in is True and status.client_id == "client-1"
    assert status.url == "https://mcp.example.com/mcp"
    text = repr(status)
    for secret in ("at-1", "rt-1", "url-key", "url-frag"):
        assert secret not in text
    assert status.redirect_port == 4711  # the registration's, to be used again


def test_a_configured_redirect_port_wins(tmp_path: Path) -> None:
    assert state(tmp_path, server(auth={"redirect_port": 9999})).status().redirect_port == 9999


# -- keeping the login --


async def test_a_saved_login_is_taken_back_once(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("srv", stored())
    auth = state(tmp_path)
    restored = []
    auth.on_tokens = lambda: restored.append(True)
    await auth.load()
    assert auth.creds.header == "Bearer at-1" and restored == [True]
    await store.save("srv", stored(held=tokens("at-other")))
    await auth.load()
    assert auth.creds.header == "Bearer at-1" and restored == [True]


async def test_a_login_saved_for_another_url_is_not_sent_there_and_its_url_not_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = "https://old:old-pw@mcp.example.com/v1?key=old-key"
    await OAuthStore(str(tmp_path)).save("srv", stored(old))
    auth = state(tmp_path, server("https://mcp.example.com/mcp?key=new-key"))
    restored = []
    auth.on_tokens = lambda: restored.append(True)
    with caplog.at_level(logging.INFO, "mcpd.auth"):
        await auth.load()
    assert auth.creds.tokens is None and auth.creds.header is None and restored == []
    assert auth.status().logged_in is False
    (line,) = [r.getMessage() for r in caplog.records if r.name == "mcpd.auth"]
    assert "https://mcp.example.com/v1" in line and "https://mcp.example.com/mcp" in line
    for secret in ("old-pw", "old-key", "new-key"):
        assert secret not in line


async def test_a_login_that_cannot_be_saved_is_kept_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    auth = state(blocker)
    changed = []
    auth.on_tokens = lambda: changed.append(True)
    with caplog.at_level(logging.ERROR, "mcpd.auth"):
        await auth.adopt(result(tokens("at-9")), None)
    assert auth.creds.header == "Bearer at-9" and changed == [True]
    (line,) = [r.getMessage() for r in caplog.records if r.name == "mcpd.auth"]
    assert "cannot save the login" in line and "kept in memory only" in line
    assert "at-9" not in line


async def test_a_login_wakes_whoever_waits_and_clears_the_need(tmp_path: Path) -> None:
    auth = state(tmp_path)
    changes: list[str | None] = []
    auth.on_change = lambda: changes.append(auth.needs_login)
    lost = auth.lost("the refresh token was refused")
    assert isinstance(lost, LoginRequired)
    reason = "the refresh token was refused; run `mcpd auth login srv`"
    assert lost.reason == auth.needs_login == reason
    assert auth.status().state == "needs_login"
    woken = trio.Event()

    async def wait() -> None:
        await auth.wait_changed()
        woken.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert not woken.is_set()
            await auth.adopt(result(tokens()), ("read",))
    assert woken.is_set() and auth.needs_login is None
    assert auth.status().state == "logged_in"
    assert changes == [reason, None]
    assert (tmp_path / "oauth" / "srv.json").exists()


def test_a_refusal_that_names_no_metadata_names_both_ways_forward(tmp_path: Path) -> None:
    auth = state(tmp_path)
    exc = auth.unclear_refusal(None)
    assert "no WWW-Authenticate" in exc.reason
    assert "[servers.srv.headers]" in exc.reason and "mcpd auth login srv" in exc.reason
    assert auth.status().state == "needs_login"


def test_login_scopes_are_the_configured_ones_in_order_without_repeats(tmp_path: Path) -> None:
    assert state(tmp_path).login_scopes() is None
    assert state(tmp_path, server(auth={"scopes": []})).login_scopes() is None
    scoped = state(tmp_path, server(auth={"scopes": ["b", "a", "b"]}))
    assert scoped.login_scopes() == ("b", "a")


# -- TLS to the server's own origin --


def test_tls_is_the_default_unless_the_server_config_changes_it(tmp_path: Path) -> None:
    assert _tls(server("http://mcp.example.com/mcp")) is None
    assert _tls(server()) is None
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    custom = _tls(server(ca_file=str(ca_file)))
    assert custom is not None
    assert custom.verify_mode is ssl.CERT_REQUIRED and custom.check_hostname
    assert len(custom.get_ca_certs()) == 1
    unverified = _tls(server(tls_verify=False))
    assert unverified is not None
    assert unverified.verify_mode is ssl.CERT_NONE and not unverified.check_hostname
