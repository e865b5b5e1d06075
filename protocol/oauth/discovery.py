"""Discovery as a state machine: from a 401 to a validated authorization server.

``Discovery`` hands out one GET at a time and takes its response:

1. protected-resource metadata: the ``resource_metadata`` URL of the challenge if
   there is one (and only that: a server that names its metadata and then fails to
   serve it is broken, and guessing would hide it), else the well-known URLs in
   MCP order. The document must speak for this server;
2. authorization-server metadata for the chosen issuer, at the well-known URLs in
   MCP order; the first document found must carry that exact issuer, or
   discovery fails (a bad document is never skipped for the next candidate);
3. with no resource metadata at all (a 2025-03-26 server), the server's origin
   is the issuer; and if it has no metadata either, the 2025-03-26 default
   endpoints are used. That revision requires the fallback, but a server that
   serves no metadata at all may as well not speak OAuth: the result keeps the
   URLs that were tried (``looked_at``), so that what the guessed endpoints then
   answer can be told as that. Without the fallback (``allow_legacy=False``,
   for servers of a later revision), finding no resource metadata where the
   challenge named none raises ``NoAuthorizationMetadata``.

Any status but 200 counts as "not here" and moves to the next candidate
(redirects are not followed: a metadata document is where it is said to be); when
none is left the error lists what each URL answered. Every URL goes through the
``FetchPolicy`` before it is handed out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import msgspec

from ..shown.visible import quote
from .challenge import BearerChallenge
from .errors import NoAuthorizationMetadata, OAuthError, OAuthProtocolError, OAuthUsageError
from .http import HttpRequest, HttpResponse, get
from .metadata import (
    AuthorizationServer,
    ResourceMetadata,
    choose_issuer,
    default_endpoints,
    parse_resource_metadata,
    parse_server_metadata,
)
from .ssrf import FetchPolicy
from .urls import canonical_resource, metadata_urls, parse_http_url, prm_urls, server_origin


class DiscoveryState(enum.Enum):
    RESOURCE_METADATA = "resource metadata"
    SERVER_METADATA = "authorization server metadata"
    DONE = "done"
    FAILED = "failed"


class DiscoveryResult(msgspec.Struct, frozen=True):
    server_url: str
    # The value of resource= : the resource the metadata names, or (2025-03-26, no
    # resource metadata) the canonical server URI.
    resource: str
    server: AuthorizationServer
    resource_metadata: ResourceMetadata | None = None
    challenge: BearerChallenge | None = None
    # The metadata URLs that had no document and what they answered, when the
    # default endpoints stand in.
    looked_at: tuple[tuple[str, int], ...] = ()

    @property
    def legacy(self) -> bool:
        """No resource metadata: the 2025-03-26 rules applied."""
        return self.resource_metadata is None

    @property
    def issuer(self) -> str:
        return self.server.issuer


class Discovery:
    def __init__(
        self,
        server_url: str,
        challenge: BearerChallenge | None,
        *,
        policy: FetchPolicy,
        known_issuers: Iterable[str] = (),
        allow_legacy: bool = True,
        protocol_version: str | None = None,
    ) -> None:
        self.server_url = server_url
        self.challenge = challenge
        self._policy = policy
        self._known = tuple(known_issuers)
        self._allow_legacy = allow_legacy
        self._version = protocol_version
        self._origin = parse_http_url(server_url, "server URL").origin
        self._named = challenge is not None and challenge.resource_metadata is not None
        self._candidates: list[str] = (
            [challenge.resource_metadata]
            if challenge is not None and challenge.resource_metadata is not None
            else prm_urls(server_url)
        )
        self._tried: list[str] = []
        self._looked_at: list[tuple[str, int]] = []
        self._prm: ResourceMetadata | None = None
        self._issuer: str | None = None
        self._result: DiscoveryResult | None = None
        self.state = DiscoveryState.RESOURCE_METADATA
        self._pending: HttpRequest | None = None
        self._guard(self._advance)

    @property
    def result(self) -> DiscoveryResult:
        if self._result is None:
            raise OAuthUsageError(f"discovery is not finished (state: {self.state.value})")
        return self._result

    def next_request(self) -> HttpRequest | None:
        """The request to execute next, or ``None`` once discovery is done."""
        if self.state is DiscoveryState.FAILED:
            raise OAuthUsageError("discovery failed; start a new one")
        return self._pending

    def receive(self, response: HttpResponse) -> None:
        if self._pending is None:
            raise OAuthUsageError("no discovery request is outstanding")
        request, self._pending = self._pending, None
        self._guard(lambda: self._handle(request, response))

    def _guard(self, step: Callable[[], None]) -> None:
        try:
            step()
        except OAuthError:
            self.state = DiscoveryState.FAILED
            raise

    def _handle(self, request: HttpRequest, response: HttpResponse) -> None:
        if response.status != 200:
            note = " (a redirect, not followed)" if 300 <= response.status < 400 else ""
            self._tried.append(f"{quote(request.url)}: HTTP {response.status}{note}")
            self._looked_at.append((request.url, response.status))
            self._advance()
            return
        if self.state is DiscoveryState.RESOURCE_METADATA:
            self._prm = parse_resource_metadata(response, request.url, self.server_url)
            self._start_server(choose_issuer(self._prm, self._known))
        else:
            assert self._issuer is not None
            meta = parse_server_metadata(response, request.url, self._issuer)
            self._finish(AuthorizationServer(self._issuer, meta, "metadata", request.url))

    def _start_server(self, issuer: str) -> None:
        self._policy.check_url(issuer, "authorization server")
        self.state = DiscoveryState.SERVER_METADATA
        self._issuer = issuer
        self._candidates = metadata_urls(issuer)
        self._tried = []
        self._advance()

    def _advance(self) -> None:
        if self._candidates:
            url = self._candidates.pop(0)
            self._policy.check_url(url, self.state.value)
            extra = []
            if self._version and url.startswith(self._origin + "/"):
                extra.append(("MCP-Protocol-Version", self._version))
            self._pending = get(url, self.state.value, extra)
            return
        tried = "; ".join(self._tried)
        if self.state is DiscoveryState.RESOURCE_METADATA:
            if not self._named and not self._allow_legacy:
                raise NoAuthorizationMetadata(tuple(self._looked_at))
            if self._named:
                raise OAuthProtocolError(
                    f"the server publishes no protected resource metadata ({tried}); "
                    "mcpd cannot find its authorization server"
                )
            self._start_server(server_origin(self.server_url))
            return
        assert self._issuer is not None
        if self._prm is None:
            self._finish(default_endpoints(self._issuer), tuple(self._looked_at))
            return
        raise OAuthProtocolError(
            f"the authorization server {quote(self._issuer)} publishes no metadata ({tried})"
        )

    def _finish(
        self, server: AuthorizationServer, looked_at: tuple[tuple[str, int], ...] = ()
    ) -> None:
        resource = self._prm.resource if self._prm is not None else None
        self._result = DiscoveryResult(
            server_url=self.server_url,
            resource=resource or canonical_resource(self.server_url),
            server=server,
            resource_metadata=self._prm,
            challenge=self.challenge,
            looked_at=looked_at,
        )
        self.state = DiscoveryState.DONE
        self._pending = None
