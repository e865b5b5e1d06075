"""The OAuth I/O layer against a local protected endpoint and authorization server:
what mcpd sends on the wire, and what the fetch policy keeps it from reaching."""

from __future__ import annotations

import json
import ssl
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
import trustme

from protocol.oauth import (
    AuthorizationFlow,
    AuthorizationResult,
    BearerChallenge,
    BlockedUrl,
    ClientConfig,
    FetchPolicy,
    FlowConfig,
    HttpRequest,
    HttpResponse,
    NoAuthorizationMetadata,
    OpenBrowser,
    Secret,
    TokenEndpointError,
    bearer_challenge,
    redirect_for_issuer,
)
from protocol.oauth.authorize import state_of
from protocol.oauth.http import get
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.server import OAuthServer, serve_oauth
from transports.errors import TransportError
from transports.http.oauth_client import OAuthHttp, Resolver
from transports.http.oauth_redirect import redirect_listener

LIMIT = 10
REDIRECT = "http://127.0.0.1:33418/callback"


def mcp_post(url: str, token: str | None = None) -> HttpRequest:
    headers = [("Content-Type", "application/json"), ("Accept", "application/json")]
    if token is not None:
        headers.append(("Authorization", token))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    return HttpRequest("POST", url, tuple(headers), body.encode(), "MCP request")


def challenge_of(response: HttpResponse) -> BearerChallenge | None:
    return bearer_challenge(v for k, v in response.headers if k == "www-authenticate")


async def login(
    http: OAuthHttp, srv: OAuthServer, policy: FetchPolicy, client: ClientConfig | None = None
) -> AuthorizationResult:
    response = await http.execute(mcp_post(srv.mcp_url), policy)
    assert response.status == 401
    challenge = challenge_of(response)
    flow = AuthorizationFlow(
        FlowConfig(srv.mcp_url, client=client or ClientConfig(), redirect_uri=REDIRECT),
        policy=policy,
        now=time.time(),
        challenge=challenge,
    )

    async def browser(action: OpenBrowser) -> str:
        return await follow_authorization(http, action.url, policy)

    return await http.run_flow(flow, policy, browser)


async def test_login_then_use_the_token() -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv:
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            assert policy.allow_loopback  # a local server may use local addresses
            result = await login(http, srv, policy)
            response = await http.execute(
                mcp_post(srv.mcp_url, result.tokens.authorization()), policy
            )
    assert response.status == 200
    assert srv.failures == []  # PKCE, resource and redirect_uri all matched
    seen = [(r.method, urlsplit(r.target).path) for r in srv.http.requests]
    assert seen == [
        ("POST", "/mcp"),
        ("GET", "/.well-known/oauth-protected-resource/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/register"),
        ("GET", "/authorize"),
        ("POST", "/token"),
        ("POST", "/mcp"),
    ]
    metadata_get = srv.http.requests[1]
    assert metadata_get.header("host") == f"127.0.0.1:{srv.http.port}"
    assert metadata_get.header("authorization") is None
    assert metadata_get.header("accept") == "application/json"
    registration = srv.http.requests[3]
    assert registration.header("content-type") == "application/json"
    # The client is registered for this authorization server's own redirect address.
    assert json.loads(registration.body)["redirect_uris"] == [
        redirect_for_issuer(REDIRECT, srv.base)
    ]
    token = srv.http.requests[5]
    assert token.header("content-type") == "application/x-www-form-urlencoded"
    form = srv.token_forms[0]
    assert form["resource"] == srv.mcp_url and form["client_id"] == "registered-client"
    authorize = parse_qs(urlsplit(srv.http.requests[4].target).query)
    assert authorize["code_challenge_method"] == ["S256"]
    assert authorize["resource"] == [srv.mcp_url]
    assert result.tokens.expires_at is not None
    assert result.tokens.expires_at == pytest.approx(time.time() + 3600, abs=30)


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_confidential_client_authentication(method: str) -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv:
            srv.auth_method = method
            srv.client_id = "pre-registered"
            srv.client_secret = "pre-secret"
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            client = ClientConfig(
                client_id="pre-registered", client_secret=Secret("pre-secret"), issuer=srv.base
            )
            result = await login(http, srv, policy, client)
    assert srv.failures == []
    assert "/register" not in [urlsplit(r.target).path for r in srv.http.requests]
    token = next(r for r in srv.http.requests if r.target == "/token")
    assert (token.header("authorization") is not None) is (method == "client_secret_basic")
    assert result.registration.source == "preregistered"


async def test_refresh_rotates_and_revocation_ends_it() -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv:
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            first = await login(http, srv, policy)
            server, reg = first.discovery.server, first.registration
            second = await http.refresh(server, reg, first.tokens, policy)
            assert second.access_token != first.tokens.access_token
            assert second.refresh_token != first.tokens.refresh_token
            ok = await http.execute(mcp_post(srv.mcp_url, second.authorization()), policy)
            assert ok.status == 200
            # the rotated-out refresh token no longer works, and says a login is needed
            with pytest.raises(TokenEndpointError) as info:
                await http.refresh(server, reg, first.tokens, policy)
            assert info.value.needs_login
            assert second.refresh_token is not None
            assert await http.revoke(server, reg, second.refresh_token, "refresh_token", policy)
            with pytest.raises(TokenEndpointError):
                await http.refresh(server, reg, second, policy)
    assert srv.revoked == [second.refresh_token.reveal()]
    refresh_form = srv.token_forms[1]
    assert refresh_form["grant_type"] == "refresh_token"
    assert refresh_form["resource"] == srv.mcp_url


async def test_discover_from_a_challenge() -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv:
            srv.challenge_scope = "mcp:basic"
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            response = await http.execute(mcp_post(srv.mcp_url), policy)
            challenge = challenge_of(response)
            result = await http.discover(srv.mcp_url, challenge, policy)
    assert challenge is not None and challenge.scope == ("mcp:basic",)
    assert result.issuer == srv.base and result.resource == srv.mcp_url


async def test_redirects_are_not_followed() -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv:
            srv.prm_redirect = True
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            with pytest.raises(NoAuthorizationMetadata, match="redirect, not followed"):
                await http.discover(srv.mcp_url, None, policy, allow_legacy=False)
    paths = [urlsplit(r.target).path for r in srv.http.requests]
    assert "/elsewhere/prm" not in paths
    assert paths == [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ]


def fixed_resolver(table: dict[str, list[str]]) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        return table.get(host, [host])

    return resolve


async def test_a_remote_server_cannot_point_mcpd_at_local_services() -> None:
    with trio.fail_after(LIMIT):
        async with serve_oauth() as local:
            resolver = fixed_resolver(
                {
                    "mcp.example.com": ["93.184.216.34"],
                    "internal.example.com": ["10.1.2.3"],
                    "rebind.example.com": ["93.184.216.35", "127.0.0.1"],
                    "metadata.example.com": ["169.254.169.254"],
                }
            )
            http = OAuthHttp(resolver=resolver)
            policy = await http.policy_for("https://mcp.example.com/mcp")
            assert not (policy.allow_loopback or policy.allow_private or policy.allow_link_local)
            for url, why in [
                (local.prm_url, "loopback"),
                ("https://internal.example.com/.well-known/x", "private"),
                ("https://rebind.example.com/token", "loopback"),
                ("https://metadata.example.com/latest", "link-local"),
                ("http://93.184.216.34/x", "https"),
            ]:
                with pytest.raises(BlockedUrl, match=why):
                    await http.execute(get(url, "metadata"), policy)
    assert local.http.requests == []  # nothing reached the local server


async def test_a_server_whose_name_also_resolves_to_loopback_cannot_reach_this_machine() -> None:
    """The server's name resolves to a public address and to 127.0.0.1; its challenge
    names metadata on an internal service here, which is never asked."""
    with trio.fail_after(LIMIT):
        async with serve_oauth() as internal:
            resolver = fixed_resolver({"evil.example": ["8.8.4.4", "127.0.0.1"]})
            http = OAuthHttp(resolver=resolver)
            server = "http://evil.example:8080/mcp"
            policy = await http.policy_for(server)
            challenge = bearer_challenge(
                [f'Bearer resource_metadata="{internal.base}/internal/admin?action=wipe"']
            )
            with pytest.raises(BlockedUrl) as caught:
                await http.discover(server, challenge, policy)
            with pytest.raises(BlockedUrl, match="both public and loopback"):
                await http.execute(get(internal.prm_url, "metadata"), policy)
    assert "evil.example resolves to both public and loopback addresses" in str(caught.value)
    assert internal.http.requests == []


async def test_the_connection_goes_to_the_checked_address(tmp_path: Path) -> None:
    """A name is resolved once and the connection made to that address, with TLS
    still verifying the name."""
    ca = trustme.CA()
    cert = ca.issue_cert("auth.test")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with trio.fail_after(LIMIT):
        async with serve_oauth(ssl_context=server_ctx) as srv:
            resolver = fixed_resolver({"auth.test": ["127.0.0.1"]})
            http = OAuthHttp(resolver=resolver, ca_file=str(ca_file))
            policy = FetchPolicy(allow_loopback=True)
            url = f"https://auth.test:{srv.http.port}/.well-known/oauth-authorization-server"
            response = await http.execute(get(url, "metadata"), policy)
            assert response.status == 200
            with pytest.raises(TransportError, match="TLS"):
                await OAuthHttp(resolver=resolver).execute(get(url, "metadata"), policy)
    assert srv.http.requests[0].header("host") == f"auth.test:{srv.http.port}"


async def test_the_servers_own_tls_settings_stay_on_its_origin() -> None:
    """A context for the MCP server's origin (here: no verification) is used there
    and nowhere else: another origin with the same untrusted certificate is refused."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    relaxed = ssl.create_default_context()
    relaxed.check_hostname = False
    relaxed.verify_mode = ssl.CERT_NONE
    with trio.fail_after(LIMIT):
        async with (
            serve_oauth(ssl_context=server_ctx) as own,
            serve_oauth(ssl_context=server_ctx) as other,
        ):
            http = OAuthHttp(server_url=own.mcp_url, server_tls=relaxed)
            policy = FetchPolicy(allow_loopback=True)
            path = "/.well-known/oauth-authorization-server"
            response = await http.execute(get(own.http.url(path), "metadata"), policy)
            assert response.status == 200
            with pytest.raises(TransportError) as info:
                await http.execute(get(other.http.url(path), "metadata"), policy)
    assert "TLS failure" in info.value.reason
    assert f"apply to https://127.0.0.1:{own.http.port} only" in info.value.reason
    assert other.http.requests == []


async def test_bodies_are_bounded() -> None:
    async def huge(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, b"{" + b" " * 100_000 + b"}")

    with trio.fail_after(LIMIT):
        async with serve_http(huge) as srv:
            http = OAuthHttp(max_body=10_000)
            with pytest.raises(TransportError, match="larger than 10000 bytes"):
                await http.execute(get(srv.url("/x"), "metadata"), FetchPolicy(allow_loopback=True))


async def test_a_silent_server_meets_the_deadline() -> None:
    async def silent(req: SeenRequest, respond: Responder) -> None:
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(silent) as srv:
            http = OAuthHttp(timeout=0.3)
            with pytest.raises(TransportError, match=r"timed out after 0\.3 s"):
                await http.execute(get(srv.url("/x"), "metadata"), FetchPolicy(allow_loopback=True))


async def test_login_through_a_loopback_redirect_listener() -> None:
    """The browser step as it happens for a person: the authorization server
    redirects the browser to mcpd's loopback listener, which hands the redirect
    to the flow."""
    with trio.fail_after(LIMIT):
        async with serve_oauth() as srv, redirect_listener() as listener:
            assert listener.redirect_uri.startswith("http://127.0.0.1:")
            http = OAuthHttp()
            policy = await http.policy_for(srv.mcp_url)
            flow = AuthorizationFlow(
                FlowConfig(srv.mcp_url, redirect_uri=listener.redirect_uri),
                policy=policy,
                now=time.time(),
            )

            async def browser(action: OpenBrowser) -> str:
                state = state_of(action.url)
                assert state is not None
                listener.expect(state)
                location = await follow_authorization(http, action.url, policy)
                stray = await http.execute(
                    get(f"{location.split('/callback')[0]}/favicon.ico", "x"), policy
                )
                assert stray.status == 404
                page = await http.execute(get(location, "the browser"), policy)
                assert page.status == 200 and b"close this window" in page.body
                again = await http.execute(get(location, "the browser"), policy)
                assert again.status == 200
                return await listener.next()

            result = await http.run_flow(flow, policy, browser)
    assert result.tokens.access_token.reveal() in srv.issued
    assert srv.failures == []
