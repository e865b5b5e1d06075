"""What mcpd holds to authorize itself to one server: one authorization server in use
at a time, everything of an old one dropped when the server names another, a
pre-registered client's secret never kept beside the tokens, the port a login listens
on, and a summary for people that never holds a token."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.config.tables.servertable import AuthConfig
from mcpd.local.state.oauth_store import IssuerRecord, StoredLogin
from mcpd.login_answers import LoginStatus
from mcpd.servers.oauth.credentials import Credentials, client_config
from protocol.oauth import (
    AuthorizationResult,
    AuthorizationServer,
    ClientConfig,
    ClientRegistration,
    DiscoveryResult,
    Secret,
    TokenSet,
)
from protocol.oauth.metadata import ServerMetadata

URL = "https://mcp.example.test/mcp"
OLD, NEW = "https://old-as.example.test", "https://new-as.example.test"


def server(issuer: str) -> AuthorizationServer:
    return AuthorizationServer(issuer, ServerMetadata(issuer))


def discovery(issuer: str) -> DiscoveryResult:
    return DiscoveryResult(URL, URL, server(issuer))


def tokens(access: str = "at-1", refresh: str | None = "rt-1", **keys: Any) -> TokenSet:
    return TokenSet(Secret(access), refresh_token=None if refresh is None else Secret(refresh),
                    **keys)  # fmt: skip


def logged_in(issuer: str = OLD, **reg: Any) -> Credentials:
    creds = Credentials(URL, ClientConfig(client_secret=Secret("configured-secret")))
    registration = ClientRegistration(issuer, reg.pop("client_id", "cid"), **reg)
    creds.adopt(AuthorizationResult(tokens(), registration, discovery(issuer)))
    return creds


def shown(creds: Credentials, now: float) -> dict[str, object]:
    """What a login's status says of the login ``creds`` hold, as its JSON reads."""
    status = LoginStatus(
        server="srv",
        type="oauth",
        url=URL,
        issuer=creds.issuer,
        client_id=creds.client_id(),
        logged_in=creds.tokens is not None,
        needs_login=None,
        redirect_port=0,
        state="",
    )
    said = msgspec.to_builtins(creds.shown(status, now))
    return {k: v for k, v in said.items() if k not in _NOT_THE_LOGINS}


_NOT_THE_LOGINS = ("server", "type", "url", "needs_login", "redirect_port", "state")


def test_a_finished_login_puts_its_issuer_and_tokens_in_use() -> None:
    creds = logged_in()
    assert creds.issuer == OLD
    assert creds.header == "Bearer at-1"
    assert creds.server == server(OLD)
    assert creds.has_tokens_saved()


def test_a_preregistered_secret_is_not_kept_but_put_back_from_the_config() -> None:
    creds = logged_in(client_secret=Secret("from-the-as"), source="preregistered")
    current = creds.record.current
    assert current is not None and current.registration is not None
    assert current.registration.client_secret is None  # what the file would hold
    reg = creds.registration()
    assert reg is not None and reg.client_secret is not None
    assert reg.client_secret.reveal() == "configured-secret"


def test_a_dynamic_registrations_own_secret_is_kept() -> None:
    creds = logged_in(client_secret=Secret("issued"), source="dynamic")
    reg = creds.registration()
    assert reg is not None and reg.client_secret is not None
    assert reg.client_secret.reveal() == "issued"


def test_what_is_masked_is_the_tokens_and_a_secret_issued_at_registration() -> None:
    issued = "issued-Zq9xK8jH6gF4dS2aL0p"
    long_tokens = tokens("at-Zq9xK8jH6gF4dS2aL0pO9iU", "rt-Zq9xK8jH6gF4dS2aL0pO9iU")
    dynamic = ClientRegistration(OLD, "cid", Secret(issued), source="dynamic")
    creds = Credentials(URL, ClientConfig(client_secret=Secret("configured-Zq9xK8jH6gF4dS2")))
    creds.adopt(AuthorizationResult(long_tokens, dynamic, discovery(OLD)))
    assert sorted(creds.to_mask()) == sorted(
        ["at-Zq9xK8jH6gF4dS2aL0pO9iU", "rt-Zq9xK8jH6gF4dS2aL0pO9iU", issued]
    )
    # A configured secret is the config's to mask; a short one could be a word.
    for reg in (
        ClientRegistration(OLD, "cid", Secret("from-the-as-Zq9xK8jH6gF4d"), source="preregistered"),
        ClientRegistration(OLD, "cid", Secret("short"), source="dynamic"),
    ):
        creds = Credentials(URL, ClientConfig(client_secret=Secret("configured-Zq9xK8jH6gF4dS2")))
        creds.adopt(AuthorizationResult(tokens(), reg, discovery(OLD)))
        assert creds.to_mask() == []


def test_a_server_that_moved_voids_everything_of_the_old_authorization_server() -> None:
    creds = logged_in(OLD)
    creds.moved(discovery(NEW))
    assert creds.issuer == NEW
    assert OLD not in creds.record.issuers
    assert creds.tokens is None and creds.header is None and creds.registration() is None
    assert creds.server == server(NEW)
    assert not creds.has_tokens_saved()


def test_tokens_are_replaced_and_dropped() -> None:
    creds = logged_in()
    creds.replace_tokens(tokens("at-2", "rt-2"))
    assert creds.header == "Bearer at-2"
    creds.drop_refresh_token()
    assert creds.tokens is not None and creds.tokens.refresh_token is None
    assert creds.header == "Bearer at-2"
    creds.drop_tokens()
    assert creds.tokens is None and not creds.has_tokens_saved()


def test_dropping_all_tokens_keeps_the_registrations() -> None:
    creds = logged_in(OLD)
    creds.record.issuers[NEW] = IssuerRecord(tokens=tokens("other"))
    creds.drop_all_tokens()
    assert not creds.has_tokens_saved()
    assert creds.registration() is not None


def test_a_forgotten_client_is_kept_with_the_tokens_issued_to_it_until_they_go() -> None:
    creds = logged_in(client_secret=Secret("issued-Zq9xK8jH6gF4dS2aL0p"), source="dynamic")
    assert creds.forget_registered_client() == "cid"
    assert creds.registration() is None and creds.registrations() == {}
    kept = creds.tokens_client()
    assert kept is not None and kept.client_id == "cid"
    assert "issued-Zq9xK8jH6gF4dS2aL0p" in creds.to_mask()
    assert shown(creds, 0.0)["client_id"] == "cid"
    assert shown(creds, 0.0)["refreshable"] is True
    # A refresh's tokens are the same client's; forgetting a later one keeps this one.
    creds.replace_tokens(tokens("at-2", "rt-2"))
    creds.drop_refresh_token()
    assert creds.tokens_client() == kept
    current = creds.record.current
    assert current is not None
    current.registration = ClientRegistration(OLD, "cid-2")
    assert creds.forget_registered_client() == "cid-2"
    assert creds.tokens_client() == kept
    creds.drop_tokens()
    assert creds.tokens_client() is None and current.tokens_client is None


def test_a_login_and_a_logout_drop_the_client_kept_for_the_tokens() -> None:
    creds = logged_in()
    creds.forget_registered_client()
    fresh = ClientRegistration(OLD, "cid-2")
    creds.adopt(AuthorizationResult(tokens("at-2"), fresh, discovery(OLD)))
    assert creds.tokens_client() == fresh == creds.registration()
    current = creds.record.current
    assert current is not None and current.tokens_client is None
    creds.forget_registered_client()
    creds.drop_all_tokens()
    assert current.tokens_client is None and not creds.has_tokens_saved()
    # Without tokens there is nothing to keep a client for.
    creds = logged_in()
    creds.drop_tokens()
    creds.forget_registered_client()
    assert creds.record.current is not None and creds.record.current.tokens_client is None


def test_a_configured_client_is_never_forgotten_and_its_secret_is_put_back() -> None:
    creds = logged_in(source="preregistered")
    assert creds.forget_registered_client() is None
    reg = creds.tokens_client()
    assert reg is not None and reg.client_secret == Secret("configured-secret")


def test_a_saved_login_is_restored_for_the_client_its_tokens_were_issued_to() -> None:
    creds = logged_in()
    creds.forget_registered_client()
    saved = creds.record
    assert Credentials(URL, ClientConfig(client_id="cid")).restore(saved) is None
    assert Credentials(URL, ClientConfig(client_id="other")).restore(saved) == (
        f'the saved login is for client "cid" at the issuer "{OLD}"; the configuration '
        f'now names client "other"'
    )


def test_nothing_changes_without_a_current_issuer() -> None:
    creds = Credentials(URL, ClientConfig())
    creds.replace_tokens(tokens())
    creds.drop_tokens()
    creds.drop_refresh_token()
    assert creds.tokens is None and creds.issuer is None and creds.registration() is None


def test_only_what_was_saved_for_this_very_url_is_restored() -> None:
    creds = Credentials(URL, ClientConfig())
    assert creds.restore(StoredLogin(server_url=URL + "/other", issuer=OLD)) == (
        f"the saved login is for {URL}/other, not {URL}"
    )
    assert creds.issuer is None
    assert creds.restore(StoredLogin(server_url=URL, issuer=OLD)) is None
    assert creds.issuer == OLD


def test_only_registrations_mcpd_made_are_offered_again() -> None:
    creds = logged_in(OLD, redirect_uris=("http://127.0.0.1:4321/callback",))
    creds.record.issuers[NEW] = IssuerRecord(
        registration=ClientRegistration(NEW, "pre", source="preregistered")
    )
    assert list(creds.registrations()) == [OLD]


def test_a_login_listens_where_it_was_registered_unless_configured() -> None:
    creds = logged_in(OLD, redirect_uris=("http://127.0.0.1:4321/callback",))
    assert creds.redirect_port(8080) == 8080
    assert creds.redirect_port(0) == 4321
    odd = logged_in(OLD, redirect_uris=("http://127.0.0.1:99999/cb", "http://localhost/cb"))
    assert odd.redirect_port(0) == 0
    assert Credentials(URL, ClientConfig()).redirect_port(0) == 0


def test_the_summary_never_holds_a_token() -> None:
    creds = logged_in()
    creds.replace_tokens(
        tokens(scope=("read", "write"), expires_at=1_000_000.0, obtained_at=999_000.0)
    )
    said = shown(creds, 1_000_001.0)
    assert said == {
        "issuer": OLD,
        "client_id": "cid",
        "logged_in": True,
        "scopes": ["read", "write"],
        "expires_at": "1970-01-12T13:46:40+00:00",
        "expired": True,
        "refresh_token": True,
        "refreshable": True,
        "obtained_at": "1970-01-12T13:30:00+00:00",
    }
    assert "at-1" not in repr(said) and "rt-1" not in repr(said)
    creds.drop_tokens()
    assert shown(creds, 0.0) == {"issuer": OLD, "client_id": "cid", "logged_in": False}
    assert shown(Credentials(URL, ClientConfig()), 0.0) == {
        "issuer": None,
        "client_id": None,
        "logged_in": False,
    }


def test_the_config_gives_the_client_it_names() -> None:
    assert client_config(None) == ClientConfig()
    machine = client_config(
        AuthConfig(type="client_credentials", client_id="m", client_secret="s", issuer=OLD)
    )
    assert (machine.client_id, machine.issuer, machine.grant) == ("m", OLD, "client_credentials")
    assert machine.client_secret is not None and machine.client_secret.reveal() == "s"
    person = client_config(AuthConfig(client_id="p"))
    assert (person.grant, person.client_secret, person.signing_key) == (
        "authorization_code",
        None,
        None,
    )


def test_a_login_names_the_tokens_it_replaces_with_the_client_they_were_issued_to() -> None:
    creds = logged_in(client_id="first", source="dynamic")
    assert creds.forget_registered_client() == "first"  # kept for its tokens only
    second = ClientRegistration(OLD, "second", source="dynamic")
    replaced = creds.adopt(AuthorizationResult(tokens("at-2", "rt-2"), second, discovery(OLD)))
    assert replaced is not None
    assert replaced.tokens == tokens()
    assert replaced.client is not None and replaced.client.client_id == "first"
    assert replaced.server == server(OLD)
    assert creds.tokens_client() == second


def test_a_login_as_the_same_client_at_the_same_issuer_replaces_nothing_to_revoke() -> None:
    creds = logged_in(client_id="cid", source="dynamic")
    reg = ClientRegistration(OLD, "cid", source="dynamic")
    assert creds.adopt(AuthorizationResult(tokens("at-2", "rt-2"), reg, discovery(OLD))) is None
    assert creds.tokens == tokens("at-2", "rt-2")  # the old ones dropped
    configured = logged_in(client_id="cid", source="preregistered")
    reg = ClientRegistration(OLD, "cid", source="preregistered")
    assert configured.adopt(AuthorizationResult(tokens("at-2"), reg, discovery(OLD))) is None


def test_tokens_replaced_by_a_login_at_another_issuer_are_no_longer_held_there() -> None:
    creds = logged_in(OLD)  # as "cid", the client id the new issuer gives too
    elsewhere = AuthorizationResult(tokens("at-2"), ClientRegistration(NEW, "cid"), discovery(NEW))
    replaced = creds.adopt(elsewhere)
    assert replaced is not None and replaced.server == server(OLD)
    assert replaced.client is not None and replaced.client.client_id == "cid"
    assert creds.record.issuers[OLD].tokens is None
    assert creds.tokens == tokens("at-2")
