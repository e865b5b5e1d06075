"""The authorization state machine against a scripted resource and authorization
server: each test is one of the situations the conformance suite's client auth
scenarios set up, checked on the requests mcpd would send."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

import pytest

from protocol.oauth import (
    AuthorizationDenied,
    AuthorizationFlow,
    BearerChallenge,
    BlockedUrl,
    ClientConfig,
    ClientRegistration,
    FetchPolicy,
    FlowConfig,
    FlowState,
    HttpResponse,
    NoAuthorizationMetadata,
    OAuthConfigError,
    OAuthProtocolError,
    OAuthUsageError,
    OpenBrowser,
    Secret,
    SendRequest,
    TokenEndpointError,
    bearer_challenge,
    load_signing_key,
    redirect_for_issuer,
)
from protocol.oauth.jws import ASSERTION_TYPE
from protocol.oauth.keys import EcPrivateKey
from tests.support.oauth.fake import (
    NOT_FOUND,
    FakeWorld,
    counter_random,
    drive,
    json_response,
    s256,
)
from tests.support.oauth.jws_check import es256_verifies

REDIRECT = "http://127.0.0.1:33418/callback"
# Where a login at the fake world's authorization server comes back to.
OWN = redirect_for_issuer(REDIRECT, "https://auth.example.com")
NAMED = BearerChallenge(
    resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
)


def drive_to_browser(flow: AuthorizationFlow, world: FakeWorld) -> OpenBrowser:
    action = flow.next_action()
    while isinstance(action, SendRequest):
        flow.receive_response(world.handle(action.request), 1000.0)
        action = flow.next_action()
    assert isinstance(action, OpenBrowser)
    return action


def make_flow(
    world: FakeWorld,
    challenge: BearerChallenge | None = NAMED,
    *,
    client: ClientConfig | None = None,
    allow_legacy: bool = True,
    **kw: Any,
) -> AuthorizationFlow:
    config = FlowConfig(
        server_url=world.server_url,
        client=client or ClientConfig(),
        redirect_uri=REDIRECT,
        allow_legacy=allow_legacy,
    )
    return AuthorizationFlow(
        config, policy=FetchPolicy(), now=1000.0, challenge=challenge, random=counter_random(), **kw
    )


def test_full_flow_with_named_metadata_and_dynamic_registration() -> None:
    world = FakeWorld()
    result = drive(make_flow(world), world, now=5000.0)

    assert world.urls() == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/register",
        "https://auth.example.com/token",
    ]
    registration = json.loads(world.requests[2].body)
    assert registration["application_type"] == "native"
    assert registration["redirect_uris"] == [OWN]
    assert registration["grant_types"] == ["authorization_code", "refresh_token"]
    assert registration["token_endpoint_auth_method"] == "none"

    (query,) = world.authorize_queries
    assert query["response_type"] == "code"
    assert query["client_id"] == "dyn-client"
    assert query["code_challenge_method"] == "S256"
    assert query["resource"] == "https://mcp.example.com/mcp"
    assert query["redirect_uri"] == OWN
    assert "scope" not in query  # nothing in the challenge or the metadata

    token = world.form(world.requests[3])
    assert token["grant_type"] == "authorization_code"
    assert token["code"] == "code-1"
    assert s256(token["code_verifier"]) == query["code_challenge"]
    assert token["resource"] == query["resource"]
    assert token["redirect_uri"] == OWN
    assert token["client_id"] == "dyn-client"
    assert world.requests[3].header("authorization") is None

    assert result.tokens.access_token.reveal() == "at-1"
    assert result.tokens.refresh_token == Secret("rt-1")
    assert result.tokens.expires_at == 5000.0 + 3600
    assert result.tokens.issuer == "https://auth.example.com"
    assert result.registration.client_id == "dyn-client"
    assert result.registration.issuer == "https://auth.example.com"


def test_unnamed_metadata_is_found_at_the_path_then_oidc_discovery() -> None:
    world = FakeWorld(metadata_url="https://auth.example.com/.well-known/openid-configuration")
    drive(make_flow(world, None), world)
    assert world.urls()[:3] == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_root_resource_metadata_and_an_issuer_with_a_path() -> None:
    world = FakeWorld(
        issuer="https://auth.example.com/tenant1",
        metadata_url="https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        prm_url="https://mcp.example.com/.well-known/oauth-protected-resource",
    )
    world.prm["resource"] = "https://mcp.example.com"
    drive(make_flow(world, None), world)
    urls = world.urls()
    assert urls[:3] == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
    ]
    assert "https://auth.example.com/.well-known/oauth-authorization-server" not in urls
    # resource= is the resource as the metadata publishes it
    assert world.authorize_queries[0]["resource"] == "https://mcp.example.com"


def test_custom_metadata_location_and_appended_oidc_path() -> None:
    world = FakeWorld(
        issuer="https://auth.example.com/tenant1",
        metadata_url="https://auth.example.com/tenant1/.well-known/openid-configuration",
        prm_url="https://mcp.example.com/custom/metadata/location.json",
    )
    challenge = BearerChallenge(resource_metadata=world.prm_url)
    drive(make_flow(world, challenge), world)
    assert world.urls()[:4] == [
        "https://mcp.example.com/custom/metadata/location.json",
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]


def test_named_metadata_that_is_missing_is_an_error_not_a_guess() -> None:
    world = FakeWorld(prm_url=None)
    flow = make_flow(world)
    with pytest.raises(OAuthProtocolError, match=r"no protected resource metadata.*HTTP 404"):
        drive(flow, world)
    assert world.urls() == [NAMED.resource_metadata]
    assert flow.state is FlowState.FAILED


def test_client_id_metadata_document_replaces_registration() -> None:
    world = FakeWorld()
    world.metadata["client_id_metadata_document_supported"] = True
    url = "https://mcpd.example.org/client.json"
    result = drive(make_flow(world, client=ClientConfig(metadata_url=url)), world)
    assert "https://auth.example.com/register" not in world.urls()
    assert world.authorize_queries[0]["client_id"] == url
    assert world.form(world.requests[-1])["client_id"] == url
    assert result.registration.source == "metadata-document"


def test_metadata_document_unsupported_falls_back_to_registration() -> None:
    world = FakeWorld()
    drive(make_flow(world, client=ClientConfig(metadata_url="https://m.example/c.json")), world)
    assert "https://auth.example.com/register" in world.urls()


def test_pre_registered_client_uses_basic_auth_and_does_not_register() -> None:
    world = FakeWorld()
    del world.metadata["registration_endpoint"]
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    client = ClientConfig(
        client_id="pre-registered-client",
        client_secret=Secret("pre-registered-secret"),
        issuer="https://auth.example.com",
    )
    result = drive(make_flow(world, client=client), world)
    token_request = world.requests[-1]
    assert token_request.header("authorization") == (
        "Basic cHJlLXJlZ2lzdGVyZWQtY2xpZW50OnByZS1yZWdpc3RlcmVkLXNlY3JldA=="
    )
    assert "client_secret" not in world.form(token_request)
    assert result.registration.source == "preregistered"


def test_pre_registered_credentials_for_another_issuer_are_refused() -> None:
    world = FakeWorld()
    client = ClientConfig(client_id="c", client_secret=Secret("s"), issuer="https://old.example")
    with pytest.raises(OAuthConfigError, match="belongs to the authorization server"):
        drive(make_flow(world, client=client), world)
    assert "https://auth.example.com/token" not in world.urls()


def test_no_way_to_a_client_id_says_what_to_configure() -> None:
    world = FakeWorld()
    del world.metadata["registration_endpoint"]
    with pytest.raises(OAuthConfigError, match="configure its client_id"):
        drive(make_flow(world), world)


@pytest.mark.parametrize(
    ("method", "header", "body_secret"),
    [
        ("client_secret_basic", True, False),
        ("client_secret_post", False, True),
        ("none", False, False),
    ],
)
def test_token_endpoint_auth_method_follows_the_registration(
    method: str, header: bool, body_secret: bool
) -> None:
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = [method]
    world.registration = {"client_id": "c1", "token_endpoint_auth_method": method}
    if method != "none":
        world.registration["client_secret"] = "s1"
    drive(make_flow(world), world)
    assert json.loads(world.requests[2].body)["token_endpoint_auth_method"] == method
    token_request = world.requests[-1]
    assert (token_request.header("authorization") is not None) is header
    form = world.form(token_request)
    assert ("client_secret" in form) is body_secret
    assert form["resource"] == "https://mcp.example.com/mcp"


def test_2025_03_26_server_without_resource_metadata_is_its_own_issuer() -> None:
    world = FakeWorld(
        issuer="https://mcp.example.com",
        prm_url=None,
        metadata_url="https://mcp.example.com/.well-known/oauth-authorization-server",
    )
    world.metadata["authorization_endpoint"] = "https://mcp.example.com/oauth/authorize"
    result = drive(make_flow(world, None), world)
    assert world.urls()[:3] == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
        "https://mcp.example.com/.well-known/oauth-authorization-server",
    ]
    assert result.discovery.legacy
    assert result.tokens.resource == "https://mcp.example.com/mcp"


def test_2025_03_26_default_endpoints_when_there_is_no_metadata_at_all() -> None:
    world = FakeWorld(issuer="https://mcp.example.com", prm_url=None, metadata_url="-")
    world.metadata = {
        "registration_endpoint": "https://mcp.example.com/register",
        "token_endpoint": "https://mcp.example.com/token",
    }
    world.iss_mode = "omit"
    result = drive(make_flow(world, None), world)
    assert world.urls()[-2:] == [
        "https://mcp.example.com/register",
        "https://mcp.example.com/token",
    ]
    assert result.discovery.server.source == "defaults"
    assert result.discovery.server.metadata.authorization_endpoint == (
        "https://mcp.example.com/authorize"
    )


def test_without_legacy_fallback_missing_metadata_is_an_error() -> None:
    world = FakeWorld(prm_url=None)
    with pytest.raises(NoAuthorizationMetadata) as info:
        drive(make_flow(world, None, allow_legacy=False), world)
    assert str(info.value) == (
        "no OAuth authorization metadata at "
        '"https://mcp.example.com/.well-known/oauth-protected-resource/mcp", '
        '"https://mcp.example.com/.well-known/oauth-protected-resource" (HTTP 404)'
    )
    assert world.urls() == [url for url, _ in info.value.looked_at]  # nothing guessed


def test_a_guessed_registration_endpoint_that_does_not_register_means_no_oauth() -> None:
    """2025-03-26 asks for the default endpoints when there is no metadata at all;
    what answers there with something that is no registration (a 202, as servers
    answer a POST they take for a notification; a page) is no authorization server."""
    for answer in [
        HttpResponse(202),
        HttpResponse(200, (("content-type", "text/html"),), b"<html>hello</html>"),
        json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32600}}, 400),
    ]:
        world = FakeWorld(issuer="https://mcp.example.com", prm_url=None, metadata_url="-")
        world.extra[("POST", "https://mcp.example.com/register")] = lambda r, a=answer: a
        with pytest.raises(NoAuthorizationMetadata) as info:
            drive(make_flow(world, None), world)
        assert world.urls()[-1] == "https://mcp.example.com/register"
        assert [url for url, _ in info.value.looked_at] == world.urls()[:-1]
        assert str(info.value).endswith(
            "(HTTP 404); the default registration endpoint of the 2025-03-26 revision, "
            f"https://mcp.example.com/register, answered HTTP {answer.status}, "
            "which is no client registration"
        )


def test_a_guessed_registration_endpoint_may_still_refuse_as_one() -> None:
    world = FakeWorld(issuer="https://mcp.example.com", prm_url=None, metadata_url="-")
    world.extra[("POST", "https://mcp.example.com/register")] = lambda r: json_response(
        {"error": "invalid_client_metadata", "error_description": "no loopback"}, 400
    )
    with pytest.raises(OAuthProtocolError, match='"invalid_client_metadata" - "no loopback"'):
        drive(make_flow(world, None), world)


def test_resource_metadata_for_another_resource_stops_the_flow() -> None:
    world = FakeWorld()
    world.prm["resource"] = "https://evil.example.com/mcp"
    with pytest.raises(OAuthProtocolError, match="not for the server"):
        drive(make_flow(world), world)
    assert world.urls() == [NAMED.resource_metadata]
    assert world.authorize_queries == []


def test_metadata_with_another_issuer_is_not_used() -> None:
    world = FakeWorld()
    world.metadata["issuer"] = "https://attacker.example.com"
    with pytest.raises(OAuthProtocolError, match="declares the issuer"):
        drive(make_flow(world), world)
    # neither the next well-known candidate nor any endpoint of the document
    assert world.urls() == [NAMED.resource_metadata, world.metadata_url]


@pytest.mark.parametrize("methods", [None, ["plain"]])
def test_no_pkce_s256_no_authorization(methods: list[str] | None) -> None:
    world = FakeWorld()
    if methods is None:
        del world.metadata["code_challenge_methods_supported"]
    else:
        world.metadata["code_challenge_methods_supported"] = methods
    with pytest.raises(OAuthProtocolError, match=r"PKCE|S256"):
        drive(make_flow(world), world)
    assert "https://auth.example.com/register" not in world.urls()


@pytest.mark.parametrize(
    ("advertised", "mode", "ok"),
    [
        (True, "correct", True),  # iss-supported
        (None, "omit", True),  # iss-not-advertised
        (True, "omit", False),  # iss-supported-missing
        (True, "wrong", False),  # iss-wrong-issuer
        (None, "wrong", False),  # iss-unexpected
        (None, "correct", True),  # present without advertising: compared, equal
        (True, "normalized", False),  # iss-normalized: trailing slash is a mismatch
    ],
)
def test_iss_validation_before_the_code_is_redeemed(
    advertised: bool | None, mode: str, ok: bool
) -> None:
    world = FakeWorld()
    if advertised is None:
        del world.metadata["authorization_response_iss_parameter_supported"]
    world.iss_mode = mode
    flow = make_flow(world)
    if ok:
        drive(flow, world)
        assert world.sent_to("https://auth.example.com/token")
    else:
        with pytest.raises(OAuthProtocolError, match="RFC 9207"):
            drive(flow, world)
        assert world.authorize_queries  # the authorization did happen
        assert not world.sent_to("https://auth.example.com/token")


def _to_redirect(flow: AuthorizationFlow, world: FakeWorld) -> OpenBrowser:
    while isinstance(action := flow.next_action(), SendRequest):
        flow.receive_response(world.handle(action.request), 1000.0)
    assert isinstance(action, OpenBrowser)
    return action


def test_a_redirect_with_another_state_is_refused() -> None:
    world = FakeWorld()
    flow = make_flow(world)
    action = _to_redirect(flow, world)
    redirect = world.authorize(action.url).replace("state=", "state=x")
    with pytest.raises(OAuthProtocolError, match="state"):
        flow.receive_redirect(redirect, 1000.0)


def test_an_error_redirect_is_reported_only_after_iss_checks_out() -> None:
    world = FakeWorld()
    flow = make_flow(world)
    action = _to_redirect(flow, world)
    state = world.authorize(action.url).split("state=")[1].split("&")[0]
    denied = f"{OWN}?error=access_denied&error_description=no&state={state}"
    with pytest.raises(OAuthProtocolError, match="RFC 9207"):
        flow.receive_redirect(denied + "&iss=https%3A%2F%2Fevil.example", 1000.0)

    flow = make_flow(world)
    action = _to_redirect(flow, world)
    state = world.authorize(action.url).split("state=")[1].split("&")[0]
    denied = f"{OWN}?error=access_denied&state={state}&iss=https%3A%2F%2Fauth.example.com"
    with pytest.raises(AuthorizationDenied) as info:
        flow.receive_redirect(denied, 1000.0)
    assert info.value.error == "access_denied"


def test_after_a_redirect_that_failed_another_one_is_awaited() -> None:
    """Another local user can send a redirect with the state (it can be read where the
    browser was told of it): their error, or their code that the token endpoint
    refuses, must not end the authorization the browser is still completing."""
    world = FakeWorld()
    flow = make_flow(world)
    action = _to_redirect(flow, world)
    real = world.authorize(action.url)
    state = real.split("state=")[1].split("&")[0]
    iss = "&iss=https%3A%2F%2Fauth.example.com"
    with pytest.raises(AuthorizationDenied):
        flow.receive_redirect(f"{OWN}?error=access_denied&state={state}{iss}", 1000.0)
    flow.await_another_redirect()
    assert flow.next_action() == action  # the same request: same state, same verifier
    world.token, world.token_status = {"error": "invalid_grant"}, 400
    flow.receive_redirect(f"{OWN}?code=theirs&state={state}{iss}", 1000.0)
    with pytest.raises(TokenEndpointError, match="invalid_grant"):
        while isinstance(step := flow.next_action(), SendRequest):
            flow.receive_response(world.handle(step.request), 1000.0)
    flow.await_another_redirect()
    assert flow.state is FlowState.AWAITING_REDIRECT and flow.next_action() == action
    world.token, world.token_status = {"access_token": "at-1", "token_type": "Bearer"}, 200
    flow.receive_redirect(real, 1000.0)
    while isinstance(step := flow.next_action(), SendRequest):
        flow.receive_response(world.handle(step.request), 1000.0)
    assert flow.state is FlowState.DONE
    exchanges = [r for r in world.requests if r.url == "https://auth.example.com/token"]
    verifiers = {parse_qs(r.body.decode())["code_verifier"][0] for r in exchanges}
    assert len(exchanges) == 2 and len(verifiers) == 1
    with pytest.raises(OAuthUsageError):
        flow.await_another_redirect()  # done is done


def test_scope_comes_from_the_challenge_first() -> None:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:read", "mcp:write"]
    challenge = bearer_challenge(
        [f'Bearer scope="mcp:basic", resource_metadata="{NAMED.resource_metadata}"']
    )
    result = drive(make_flow(world, challenge), world)
    assert world.authorize_queries[0]["scope"] == "mcp:basic"
    assert result.tokens.requested_scope == ("mcp:basic",)
    assert result.tokens.scope == ("mcp:basic",)  # the response did not say otherwise


def test_scope_falls_back_to_all_scopes_supported() -> None:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic", "mcp:read", "mcp:write"]
    drive(make_flow(world), world)
    assert world.authorize_queries[0]["scope"] == "mcp:basic mcp:read mcp:write"


@pytest.mark.parametrize(
    ("scope", "shown"),
    [
        ("mcp:read mcp:admin", '"mcp:read mcp:admin"'),
        ("mcp:read\nadmin", '"mcp:read\\nadmin"'),
        ("mcp:\u202eetirw", '"mcp:\\u202eetirw"'),
    ],
)
def test_a_scope_no_authorization_request_can_carry_is_refused_by_name(
    scope: str, shown: str
) -> None:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic", scope]
    with pytest.raises(OAuthProtocolError, match=re.escape(shown)) as caught:
        drive(make_flow(world), world)
    assert "scope" in str(caught.value)
    assert world.authorize_queries == []


def test_offline_access_only_when_the_authorization_server_lists_it() -> None:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic"]
    world.metadata["scopes_supported"] = ["mcp:basic", "offline_access"]
    drive(make_flow(world), world)
    assert world.authorize_queries[0]["scope"] == "mcp:basic offline_access"

    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic", "offline_access"]
    world.metadata["scopes_supported"] = ["mcp:basic", "mcp:read"]
    drive(make_flow(world), world)
    assert world.authorize_queries[0]["scope"] == "mcp:basic"


def test_a_request_for_offline_access_asks_for_consent_as_openid_connect_needs() -> None:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic"]
    world.metadata["scopes_supported"] = ["mcp:basic", "offline_access"]
    drive(make_flow(world), world)
    assert world.authorize_queries[0]["prompt"] == "consent"

    # Without offline_access nothing changes how the server asks the person.
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:basic"]
    drive(make_flow(world), world)
    assert "prompt" not in world.authorize_queries[0]


def test_step_up_asks_for_the_given_union_and_reuses_the_client() -> None:
    world = FakeWorld()
    first = drive(make_flow(world), world)
    registrations = {first.registration.issuer: first.registration}
    world.requests.clear()
    challenge = BearerChallenge(
        resource_metadata=NAMED.resource_metadata, scope=("mcp:write",), error="insufficient_scope"
    )
    result = drive(
        make_flow(world, challenge, scopes=("mcp:basic", "mcp:write"), registrations=registrations),
        world,
    )
    assert world.authorize_queries[-1]["scope"] == "mcp:basic mcp:write"
    assert "https://auth.example.com/register" not in world.urls()
    assert result.registration.client_id == first.registration.client_id


def test_a_new_authorization_server_means_a_new_registration() -> None:
    world = FakeWorld()
    world.registration = {"client_id": "as1-client", "client_secret": "as1-secret"}
    first = drive(make_flow(world), world)
    stored = {first.registration.issuer: first.registration}

    moved = FakeWorld(issuer="https://auth2.example.com")
    moved.registration = {"client_id": "as2-client"}
    result = drive(make_flow(moved, registrations=stored), moved)
    assert "https://auth2.example.com/register" in moved.urls()
    assert moved.authorize_queries[0]["client_id"] == "as2-client"
    assert all(b"as1-client" not in r.body for r in moved.requests)
    assert result.registration.issuer == "https://auth2.example.com"


def test_a_known_registration_for_the_issuer_is_reused() -> None:
    world = FakeWorld()
    known = ClientRegistration(
        "https://auth.example.com", "kept", None, "none", redirect_uris=(OWN,)
    )
    drive(make_flow(world, registrations={"https://auth.example.com": known}), world)
    assert "https://auth.example.com/register" not in world.urls()
    assert world.authorize_queries[0]["client_id"] == "kept"


def test_each_authorization_server_has_a_redirect_uri_of_its_own() -> None:
    first, second = FakeWorld(), FakeWorld(issuer="https://auth2.example.com")
    drive(make_flow(first), first)
    drive(make_flow(second), second)
    one, two = (w.authorize_queries[0]["redirect_uri"] for w in (first, second))
    assert one.startswith(REDIRECT + "/") and two.startswith(REDIRECT + "/")
    assert one != two
    assert json.loads(second.sent_to("https://auth2.example.com/register")[0].body)[
        "redirect_uris"
    ] == [two]


def test_an_answer_at_another_authorization_servers_address_never_reaches_the_token_endpoint() -> (
    None
):
    world = FakeWorld()
    world.iss_mode = "omit"  # and the server does not say it sends iss
    world.metadata["authorization_response_iss_parameter_supported"] = False
    flow = make_flow(world)
    action = drive_to_browser(flow, world)
    state = parse_qs(action.url.split("?", 1)[1])["state"][0]
    elsewhere = redirect_for_issuer(REDIRECT, "https://honest.example.com")
    with pytest.raises(OAuthProtocolError, match="sent nowhere"):
        flow.receive_redirect(f"{elsewhere}?code=honest-code&state={state}", 1000.0)
    assert world.sent_to("https://auth.example.com/token") == []
    flow.await_another_redirect()
    with pytest.raises(OAuthProtocolError, match="sent nowhere"):  # as a listener sees it
        flow.receive_redirect(f"/callback?code=honest-code&state={state}", 1000.0)
    assert world.sent_to("https://auth.example.com/token") == []


def test_a_kept_registration_without_the_servers_own_redirect_uri_is_made_again() -> None:
    world = FakeWorld()
    old = ClientRegistration("https://auth.example.com", "old", redirect_uris=(REDIRECT,))
    flow = make_flow(world, registrations={"https://auth.example.com": old})
    result = drive(flow, world)
    assert "https://auth.example.com/register" in world.urls()
    assert world.authorize_queries[0]["client_id"] == "dyn-client"
    assert result.registration.redirect_uris == (OWN,)
    assert flow.outgrown == old


def test_a_kept_registration_for_the_shared_redirect_uri_is_used_where_none_can_be_made() -> None:
    world = FakeWorld()
    del world.metadata["registration_endpoint"]
    old = ClientRegistration("https://auth.example.com", "old", redirect_uris=(REDIRECT,))
    flow = make_flow(world, registrations={"https://auth.example.com": old})
    result = drive(flow, world)
    assert "https://auth.example.com/register" not in world.urls()
    assert world.authorize_queries[0]["client_id"] == "old"
    assert world.authorize_queries[0]["redirect_uri"] == REDIRECT
    assert result.registration.client_id == "old"
    assert (flow.shared_redirect, flow.outgrown) == (old, None)


def test_a_client_configured_by_hand_keeps_the_redirect_uri_registered_for_it() -> None:
    world = FakeWorld()
    client = ClientConfig(client_id="by-hand", issuer="https://auth.example.com")
    drive(make_flow(world, client=client), world)
    assert world.authorize_queries[0]["redirect_uri"] == REDIRECT
    cimd = FakeWorld()
    cimd.metadata["client_id_metadata_document_supported"] = True
    url = "https://mcpd.example.org/client.json"
    drive(make_flow(cimd, client=ClientConfig(metadata_url=url)), cimd)
    assert cimd.authorize_queries[0]["redirect_uri"] == REDIRECT


def test_client_credentials_with_basic_auth() -> None:
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    del world.metadata["code_challenge_methods_supported"]  # not needed without a browser
    world.token = {"access_token": "cc-1", "token_type": "bearer", "expires_in": 60}
    client = ClientConfig(client_id="svc", client_secret=Secret("pw"), grant="client_credentials")
    result = drive(make_flow(world, client=client), world)
    assert world.authorize_queries == []
    form = world.form(world.requests[-1])
    assert form == {
        "grant_type": "client_credentials",
        "resource": "https://mcp.example.com/mcp",
        "client_id": "svc",  # in the body too, never the secret
    }
    assert world.requests[-1].header("authorization") == "Basic c3ZjOnB3"
    assert result.tokens.authorization() == "Bearer cc-1"


def test_client_credentials_with_a_signed_assertion() -> None:
    key = EcPrivateKey(0xC9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721)
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = ["private_key_jwt"]
    world.metadata["token_endpoint_auth_signing_alg_values_supported"] = ["ES256"]
    client = ClientConfig(client_id="svc", signing_key=key, grant="client_credentials")
    drive(make_flow(world, client=client), world, now=1_700_000_000.0)
    form = world.form(world.requests[-1])
    assert form["client_assertion_type"] == ASSERTION_TYPE
    header, claims, signature = form["client_assertion"].split(".")
    decoded = json.loads(_b64(claims))
    assert decoded["iss"] == decoded["sub"] == "svc"
    assert decoded["aud"] == "https://auth.example.com"
    assert decoded["exp"] - decoded["iat"] <= 300 and decoded["iat"] == 1_700_000_000
    assert json.loads(_b64(header))["alg"] == "ES256"
    assert es256_verifies(key, f"{header}.{claims}".encode(), _b64(signature))


def test_an_assertion_algorithm_the_server_does_not_accept_is_a_config_error() -> None:
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = ["private_key_jwt"]
    world.metadata["token_endpoint_auth_signing_alg_values_supported"] = ["RS256"]
    key = load_signing_key('{"kty":"EC","crv":"P-256","d":"AQ"}')
    client = ClientConfig(client_id="svc", signing_key=key, grant="client_credentials")
    with pytest.raises(OAuthConfigError, match="RS256"):
        drive(make_flow(world, client=client), world)


def _b64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_token_endpoint_refusal() -> None:
    world = FakeWorld()
    world.token = {"error": "invalid_grant", "error_description": "code reused"}
    world.token_status = 400
    with pytest.raises(TokenEndpointError, match='"invalid_grant": "code reused"') as info:
        drive(make_flow(world), world)
    assert info.value.needs_login and info.value.status == 400


def test_registration_refusal_is_reported() -> None:
    world = FakeWorld()
    world.extra[("POST", "https://auth.example.com/register")] = lambda r: json_response(
        {"error": "invalid_redirect_uri", "error_description": "loopback only"}, 400
    )
    with pytest.raises(
        OAuthProtocolError, match='HTTP 400: "invalid_redirect_uri" - "loopback only"'
    ):
        drive(make_flow(world), world)


def test_endpoints_must_pass_the_fetch_policy() -> None:
    world = FakeWorld()
    world.metadata["token_endpoint"] = "http://auth.example.com/token"
    with pytest.raises(BlockedUrl, match="must use https"):
        drive(make_flow(world), world)


def test_calls_out_of_order_are_usage_errors() -> None:
    world = FakeWorld()
    flow = make_flow(world)
    with pytest.raises(OAuthUsageError):
        flow.receive_redirect(f"{REDIRECT}?code=x", 1000.0)
    action = _to_redirect(flow, world)
    assert flow.next_action() == action  # asking again changes nothing
    with pytest.raises(OAuthUsageError, match="no request is outstanding"):
        flow.receive_response(NOT_FOUND, 1000.0)


def test_a_failed_flow_says_why_when_asked_again() -> None:
    world = FakeWorld()
    world.prm["resource"] = "https://evil.example.com/mcp"
    flow = make_flow(world)
    with pytest.raises(OAuthProtocolError):
        drive(flow, world)
    with pytest.raises(OAuthUsageError, match="failed: protected resource metadata"):
        flow.next_action()


def test_redirect_uri_must_be_loopback_or_https() -> None:
    with pytest.raises(OAuthConfigError, match="loopback"):
        AuthorizationFlow(
            FlowConfig("https://mcp.example.com/mcp", redirect_uri="http://example.com/cb"),
            policy=FetchPolicy(),
            now=0.0,
        )
