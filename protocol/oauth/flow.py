"""One authorization, from a 401 to a token, as a state machine in the style of h11.

The caller asks ``next_action()`` what to do and reports back:

* ``SendRequest``: execute ``request`` and pass the answer to ``receive_response``;
* ``OpenBrowser``: send the user to ``url`` (print it, open a browser without a
  shell) and pass the redirect that comes back to ``receive_redirect``;
* ``Authorized``: done; ``result`` has the tokens, the client registration to keep
  (keyed by its issuer) and the discovery, for refreshing later.

States: DISCOVERING → (REGISTERING) → AWAITING_REDIRECT → EXCHANGING → DONE, or
DISCOVERING → (REGISTERING) → EXCHANGING → DONE for client credentials. Any error
ends in FAILED and is raised from the call that caused it; calls that do not fit
the state raise ``OAuthUsageError``. The flow never reads a clock or a random
source of its own: ``now`` comes with every call, ``random`` is injectable.
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Callable, Mapping

from .authorize import (
    PendingAuthorization,
    Pkce,
    RandomSource,
    authorization_url,
    new_state,
    parse_redirect,
    redirect_for_issuer,
)
from .challenge import BearerChallenge
from .discovery import Discovery, DiscoveryResult
from .errors import (
    NoAuthorizationMetadata,
    OAuthConfigError,
    OAuthError,
    OAuthProtocolError,
    OAuthUsageError,
)
from .flow_io import (
    AuthorizationResult,
    Authorized,
    FlowConfig,
    FlowStep,
    OpenBrowser,
    SendRequest,
    check_redirect_uri,
)
from .http import HttpResponse
from .metadata import require_endpoint, require_pkce
from .registration import (
    ClientRegistration,
    RegistrationBody,
    is_registration_error,
    parse_registration,
    registration_body,
    registration_request,
    select_identity,
)
from .scopes import (
    adjust_offline_access,
    check_scopes,
    initial_scopes,
    prompt_param,
    scope_param,
)
from .secret import Secret
from .ssrf import FetchPolicy
from .tokens import (
    client_credentials_request,
    code_exchange_request,
    parse_token_response,
)


class FlowState(enum.Enum):
    DISCOVERING = "discovering"
    REGISTERING = "registering"
    AWAITING_REDIRECT = "awaiting the redirect"
    EXCHANGING = "requesting the token"
    DONE = "done"
    FAILED = "failed"


class AuthorizationFlow:
    def __init__(
        self,
        config: FlowConfig,
        *,
        policy: FetchPolicy,
        now: float,
        challenge: BearerChallenge | None = None,
        scopes: tuple[str, ...] | None = None,
        registrations: Mapping[str, ClientRegistration] | None = None,
        discovery: DiscoveryResult | None = None,
        random: RandomSource = secrets.token_bytes,
    ) -> None:
        self.config = config
        self.state = FlowState.DISCOVERING
        self._client = config.client
        self._policy = policy
        self._random = random
        self._scopes = scopes
        self._registrations = dict(registrations or {})
        self._now = now
        self._action: FlowStep | None = None
        self._discovery: Discovery | None = None
        self._result: DiscoveryResult | None = None
        self._registration: ClientRegistration | None = None
        self._requested_body: RegistrationBody | None = None
        self._requested_scopes: tuple[str, ...] | None = None
        self.pending: PendingAuthorization | None = None
        self._redirect_uri = config.redirect_uri
        # A registration mcpd kept for the issuer that lacks the redirect URI a login
        # there now uses: registered anew.
        self.outgrown: ClientRegistration | None = None
        # One kept without it, where no new client can be had (logins then share /callback).
        self.shared_redirect: ClientRegistration | None = None
        self._failure: str | None = None
        if self._client.grant == "authorization_code":
            if config.redirect_uri is None:
                raise OAuthConfigError("a redirect URI is needed for the authorization code flow")
            check_redirect_uri(config.redirect_uri)

        def start() -> None:
            if discovery is not None:
                self._discovered(discovery)
                return
            self._discovery = Discovery(
                config.server_url,
                challenge,
                policy=policy,
                known_issuers=self._known_issuers(),
                allow_legacy=config.allow_legacy,
                protocol_version=config.protocol_version,
            )
            self._action = self._discovery_action()

        self._guard(start)

    @property
    def discovery(self) -> DiscoveryResult | None:
        return self._result

    @property
    def registration(self) -> ClientRegistration | None:
        """The client identity the authorization is made with, once known."""
        return self._registration

    def next_action(self) -> FlowStep:
        if self.state is FlowState.FAILED:
            raise OAuthUsageError(f"the authorization failed: {self._failure}")
        assert self._action is not None
        return self._action

    def receive_response(self, response: HttpResponse, now: float) -> None:
        if not isinstance(self._action, SendRequest):
            raise OAuthUsageError(f"no request is outstanding (state: {self.state.value})")
        self._now = now
        self._guard(lambda: self._on_response(response))

    def receive_redirect(self, received: str, now: float) -> None:
        if self.state is not FlowState.AWAITING_REDIRECT or self.pending is None:
            raise OAuthUsageError(f"no redirect is awaited (state: {self.state.value})")
        self._now = now
        self._guard(lambda: self._on_redirect(received))

    def await_another_redirect(self) -> None:
        """Wait again for a redirect to the same authorization request, after one that
        did not end in tokens: it was refused, carried an error, or its code was not
        taken (or never got an answer). Whoever can reach the redirect URI can send
        one with the right state, so a failed redirect need not be the browser's;
        PKCE keeps any code they send from being redeemed here, and the browser's
        own redirect can still come."""
        pending = self.pending
        if (
            pending is None
            or self._client.grant != "authorization_code"
            or self.state is FlowState.DONE
        ):
            raise OAuthUsageError(f"no redirect was awaited (state: {self.state.value})")
        self.state = FlowState.AWAITING_REDIRECT
        self._failure = None
        self._action = OpenBrowser(pending.url, pending.redirect_uri)

    def _guard(self, step: Callable[[], None]) -> None:
        try:
            step()
        except OAuthError as exc:
            self.state = FlowState.FAILED
            self._failure = str(exc)
            raise

    def _known_issuers(self) -> list[str]:
        known = list(self._registrations)
        if self._client.issuer is not None:
            known.insert(0, self._client.issuer)
        return known

    def _discovery_action(self) -> FlowStep:
        assert self._discovery is not None
        request = self._discovery.next_request()
        if request is None:
            self._discovered(self._discovery.result)
            assert self._action is not None
            return self._action
        return SendRequest(request)

    def _on_response(self, response: HttpResponse) -> None:
        if self.state is FlowState.DISCOVERING:
            assert self._discovery is not None
            self._discovery.receive(response)
            self._action = self._discovery_action()
        elif self.state is FlowState.REGISTERING:
            assert self._result is not None
            reg = self._parse_registration(response, self._result)
            self._registration = reg
            self._start_authorization()
        elif self.state is FlowState.EXCHANGING:
            self._on_token(response)
        else:  # pragma: no cover - guarded by receive_response
            raise OAuthUsageError(f"unexpected response in state {self.state.value}")

    def _parse_registration(
        self, response: HttpResponse, result: DiscoveryResult
    ) -> ClientRegistration:
        try:
            assert self._requested_body is not None  # set as the request was made
            return parse_registration(response, result.server, self._requested_body)
        except OAuthProtocolError:
            if result.server.source != "defaults" or is_registration_error(response):
                raise
        # Nothing said this server does OAuth: the endpoint was only guessed, and what
        # answered it is no authorization server.
        endpoint = result.server.metadata.registration_endpoint
        raise NoAuthorizationMetadata(
            result.looked_at,
            f"the default registration endpoint of the 2025-03-26 revision, {endpoint}, "
            f"answered HTTP {response.status}, which is no client registration",
        ) from None

    def _discovered(self, result: DiscoveryResult) -> None:
        self._result = result
        server = result.server
        if self._client.grant == "authorization_code":
            require_pkce(server)
            require_endpoint(server, "authorization_endpoint")
        require_endpoint(server, "token_endpoint")
        for name, endpoint in server.metadata.endpoints().items():
            if endpoint and name != "revocation_endpoint":
                self._policy.check_url(endpoint, name.replace("_", " "))
        base = self.config.redirect_uri
        own = redirect_for_issuer(base, server.issuer) if base is not None else None
        known = self._registrations
        stale = known.get(server.issuer)
        if own is not None and stale is not None and own not in stale.redirect_uris:
            if base in stale.redirect_uris and not server.metadata.registration_endpoint:
                # No new client can be had there: the old one is better than no login,
                # though its answers come back where any server's do.
                self.shared_redirect = stale
            else:
                # The authorization server would refuse the redirect URI, or (one
                # registered before each server had its own) send its answers where
                # any server's go.
                known = {k: v for k, v in known.items() if k != server.issuer}
                self.outgrown = stale
        chosen = select_identity(self._client, server, known, self._now)
        # A client configured by hand (its id, or a metadata document) keeps the redirect
        # URI it was registered with, as does one registered before each server had its
        # own; one mcpd registers gets its issuer's own.
        hand_made = chosen is not None and chosen.source != "dynamic"
        self._redirect_uri = base if hand_made or self.shared_redirect is not None else own
        if chosen is None:
            redirects = [own] if own else []
            self._requested_body = registration_body(self._client, server, redirects)
            self.state = FlowState.REGISTERING
            self._action = SendRequest(registration_request(self._client, server, redirects))
            return
        self._registration = chosen
        self._start_authorization()

    def _scopes_for(self, result: DiscoveryResult) -> tuple[str, ...] | None:
        scopes = self._scopes
        source = "the scopes to ask for"
        if scopes is None:
            scopes = initial_scopes(result.challenge, result.resource_metadata)
            challenged = result.challenge is not None and result.challenge.scope
            source = "the server's 401" if challenged else "the server's resource metadata"
        check_scopes(scopes, source)
        if self._client.grant == "client_credentials":
            return scopes
        return adjust_offline_access(scopes, result.server, want_refresh=self._client.want_refresh)

    def _start_authorization(self) -> None:
        result, reg = self._result, self._registration
        assert result is not None and reg is not None
        scopes = self._scopes_for(result)
        self._requested_scopes = scopes
        if self._client.grant == "client_credentials":
            self.state = FlowState.EXCHANGING
            request = client_credentials_request(
                result.server,
                reg,
                resource=result.resource,
                scopes=scopes,
                key=self._client.signing_key,
                now=self._now,
                random=self._random,
            )
            self._action = SendRequest(request)
            return
        redirect_uri = self._redirect_uri
        assert redirect_uri is not None
        pkce = Pkce.create(self._random)
        state = new_state(self._random)
        endpoint = require_endpoint(result.server, "authorization_endpoint")
        url = authorization_url(
            endpoint,
            client_id=reg.client_id,
            redirect_uri=redirect_uri,
            pkce=pkce,
            state=state,
            resource=result.resource,
            scope=scope_param(scopes),
            prompt=prompt_param(scopes),
        )
        self.pending = PendingAuthorization(
            url=url,
            state=Secret(state),
            verifier=pkce.verifier,
            issuer=result.server.issuer,
            iss_supported=result.server.metadata.authorization_response_iss_parameter_supported,
            redirect_uri=redirect_uri,
            client_id=reg.client_id,
            resource=result.resource,
            scopes=scopes,
        )
        self.state = FlowState.AWAITING_REDIRECT
        self._action = OpenBrowser(url, redirect_uri)

    def _on_redirect(self, received: str) -> None:
        result, reg, pending = self._result, self._registration, self.pending
        assert result is not None and reg is not None and pending is not None
        code = parse_redirect(received, pending)
        request = code_exchange_request(
            result.server,
            reg,
            pending,
            code,
            key=self._client.signing_key,
            now=self._now,
            random=self._random,
        )
        self.state = FlowState.EXCHANGING
        self._action = SendRequest(request)

    def _on_token(self, response: HttpResponse) -> None:
        result, reg = self._result, self._registration
        assert result is not None and reg is not None
        grant = self._client.grant
        tokens = parse_token_response(
            response,
            result.server,
            resource=result.resource,
            requested=self._requested_scopes,
            now=self._now,
            grant=grant,
        )
        self.state = FlowState.DONE
        self._action = Authorized(AuthorizationResult(tokens, reg, result))
