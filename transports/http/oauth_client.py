"""Executes the OAuth core's HTTP requests, and runs its flows.

Each ``HttpRequest`` from ``protocol.oauth`` goes out exactly as built, on a fresh
connection: the URL is checked against the ``FetchPolicy``, its host is resolved
here, every address is checked, and the connection goes to one of exactly those
addresses (TLS still verifies the host name). Connecting by name after checking
would let a DNS answer that changes in between (rebinding) reach an address that
was never checked, which is why this does not use ``ConnectionPool``: a pool
connects by name. The handful of requests a login makes do not need keep-alive.

TLS is verified the default way (against ``ca_file`` where one is given for
every origin), except on the MCP server's own origin (scheme, host and port of
its URL), which gets the context its configuration asks for (``server_tls``):
a server's relaxed verification or private CA says nothing about an
authorization server elsewhere, where a token request carries a code, a PKCE
verifier or a client secret.

Redirects are not followed (the core treats a 3xx as "not here"); bodies are
bounded; every request has an overall deadline. Failures of the network come out
as ``transports.errors.TransportError``, refusals of the policy as
``protocol.oauth.BlockedUrl``, and everything the core finds wrong as the core's
``OAuthError`` subclasses.
"""

from __future__ import annotations

import math
import secrets
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Final, Literal

import trio

from protocol.http.parts import Origin, check_header
from protocol.oauth import (
    AuthorizationFlow,
    AuthorizationResult,
    AuthorizationServer,
    Authorized,
    BearerChallenge,
    ClientRegistration,
    Discovery,
    DiscoveryResult,
    FetchPolicy,
    HttpRequest,
    HttpResponse,
    OpenBrowser,
    Secret,
    SendRequest,
    SigningKey,
    TokenSet,
    check_revocation,
    parse_token_response,
    refresh_request,
    revocation_request,
)
from protocol.oauth.http import MAX_BODY
from protocol.oauth.ssrf import parse_address
from protocol.oauth.urls import parse_http_url
from protocol.shown.server_urls import display_url
from protocol.shown.visible import quote

from ..errors import RequestUnanswered, TransportError
from .connection import HttpConnection, make_ssl_context
from .reply import unasked_coding
from .request import IDENTITY

__all__ = ["OAuthHttp", "Resolver", "system_resolver"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
Clock = Callable[[], float]
# Called with the authorization URL; returns the redirect that came back (a URL or
# the request target a loopback listener saw).
Authorize = Callable[[OpenBrowser], Awaitable[str]]

DEFAULT_TIMEOUT: Final = 30.0
_USER_AGENT: Final = "mcpd"


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system resolver, in its order."""
    if parse_address(host) is not None:
        return [host]
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise TransportError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    seen: dict[str, None] = {}
    for *_, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


class OAuthHttp:
    def __init__(
        self,
        *,
        label: str = "oauth",
        ca_file: str | None = None,
        server_url: str | None = None,
        server_tls: ssl.SSLContext | None = None,
        connect_timeout: float = 10.0,
        timeout: float = DEFAULT_TIMEOUT,
        max_body: int = MAX_BODY,
        resolver: Resolver = system_resolver,
        clock: Clock = time.time,
    ) -> None:
        self.label = label
        self._ssl: ssl.SSLContext | None = None
        self._ca_file = ca_file
        self._own: Origin | None = None
        if server_url is not None and server_tls is not None:
            u = parse_http_url(server_url, "server URL")
            self._own = Origin(u.scheme, u.host, u.port)
        self._own_tls = server_tls
        self._connect_timeout = connect_timeout
        self._timeout = timeout
        self._max_body = max_body
        self._resolve = resolver
        self._clock = clock

    def _tls(self, origin: Origin) -> ssl.SSLContext:
        if self._own_tls is not None and origin == self._own:
            return self._own_tls
        if self._ssl is None:
            self._ssl = make_ssl_context(ca_file=self._ca_file)
        return self._ssl

    async def policy_for(self, server_url: str, *, also: tuple[str, ...] = ()) -> FetchPolicy:
        """The fetch policy for discovery on behalf of ``server_url``, from the
        addresses its host resolves to now and ``also`` those it was found at
        otherwise."""
        u = parse_http_url(server_url, "server URL")
        found = [*await self._resolve(u.host, u.port), *also]
        return FetchPolicy.for_server(server_url, found)

    async def execute(self, request: HttpRequest, policy: FetchPolicy) -> HttpResponse:
        """One request, within the client's per-request deadline; ``RequestUnanswered``
        if it ran out once the request was sent."""
        limit = self._timeout
        sent = trio.Event()
        with trio.move_on_after(limit) as scope:
            return await self._execute(request, policy, sent)
        assert scope.cancelled_caught
        said = (
            f"{self.label}: {request.purpose} to {quote(display_url(request.url))} timed out "
            f"after {limit:g} s"
        )
        raise RequestUnanswered(said) if sent.is_set() else TransportError(said)

    async def _execute(
        self, request: HttpRequest, policy: FetchPolicy, sent: trio.Event
    ) -> HttpResponse:
        u = policy.check_url(request.url, request.purpose)
        allowed = policy.check_addresses(
            request.url, await self._resolve(u.host, u.port), request.purpose
        )
        origin = Origin(u.scheme, u.host, u.port)
        headers = [
            ("Host", origin.authority),
            ("User-Agent", _USER_AGENT),
            IDENTITY,
            *request.headers,
        ]
        headers.append(("Connection", "close"))
        for name, value in headers:
            check_header(name, value)
        target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        conn = await self._connect(origin, allowed, request.purpose)
        try:
            await conn.send(
                request.method.encode("ascii"),
                target.encode("ascii"),
                [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                request.body,
            )
            sent.set()
            head = await conn.receive_head()
            coded = unasked_coding(head)
            if coded is not None:
                raise TransportError(f"{self.label}: {request.purpose}: {coded}")
            body = await conn.read_body(head, self._max_body)
        finally:
            await conn.aclose()
        return HttpResponse(head.status, tuple(head.headers), body)

    async def _connect(self, origin: Origin, addresses: list[str], doing: str) -> HttpConnection:
        label = f"{self.label}: {doing}"
        last = "no address"
        with trio.move_on_after(self._connect_timeout) as scope:
            for address in addresses:
                try:
                    tcp = await trio.open_tcp_stream(address, origin.port)
                except OSError as exc:
                    last = f"{address}: {exc.strerror or exc}"
                    continue
                if origin.scheme != "https":
                    return HttpConnection(tcp, label, math.inf)
                tls = trio.SSLStream(
                    tcp, self._tls(origin), server_hostname=origin.host, https_compatible=True
                )
                try:
                    await tls.do_handshake()
                except trio.BrokenResourceError as exc:
                    await trio.aclose_forcefully(tcp)
                    cause = exc.__cause__ or exc
                    own = ""
                    if self._own is not None and origin != self._own:
                        own = f" (the server's tls_verify and ca_file apply to {self._own} only)"
                    raise TransportError(
                        f"{label}: TLS failure with {origin}: {cause}{own}"
                    ) from None
                return HttpConnection(tls, label, math.inf)
        if scope.cancelled_caught:
            raise TransportError(f"{label}: connecting to {origin} timed out")
        raise TransportError(f"{label}: cannot connect to {origin} ({last})")

    async def discover(
        self,
        server_url: str,
        challenge: BearerChallenge | None,
        policy: FetchPolicy,
        *,
        known_issuers: tuple[str, ...] = (),
        allow_legacy: bool = True,
        protocol_version: str | None = None,
    ) -> DiscoveryResult:
        """Resource and authorization-server discovery for a server that answered 401."""
        discovery = Discovery(
            server_url,
            challenge,
            policy=policy,
            known_issuers=known_issuers,
            allow_legacy=allow_legacy,
            protocol_version=protocol_version,
        )
        while (request := discovery.next_request()) is not None:
            discovery.receive(await self.execute(request, policy))
        return discovery.result

    async def run_flow(
        self, flow: AuthorizationFlow, policy: FetchPolicy, authorize: Authorize
    ) -> AuthorizationResult:
        """Drive ``flow`` to its end: requests executed here, the browser step by
        ``authorize`` (which returns the redirect it received)."""
        while True:
            action = flow.next_action()
            if isinstance(action, SendRequest):
                response = await self.execute(action.request, policy)
                flow.receive_response(response, self._clock())
            elif isinstance(action, OpenBrowser):
                flow.receive_redirect(await authorize(action), self._clock())
            else:
                assert isinstance(action, Authorized)
                return action.result

    async def refresh(
        self,
        server: AuthorizationServer,
        registration: ClientRegistration,
        tokens: TokenSet,
        policy: FetchPolicy,
        *,
        key: SigningKey | None = None,
        random: Callable[[int], bytes] | None = None,
    ) -> TokenSet:
        """New tokens for ``tokens`` from its refresh token (``TokenEndpointError``
        with ``needs_login`` when the grant is gone)."""
        now = self._clock()
        request = refresh_request(
            server, registration, tokens, key=key, now=now, random=random or secrets.token_bytes
        )
        response = await self.execute(request, policy)
        return parse_token_response(
            response,
            server,
            resource=tokens.resource,
            requested=tokens.requested_scope,
            now=self._clock(),
            previous=tokens,
            grant="refresh_token",
        )

    async def revoke(
        self,
        server: AuthorizationServer,
        registration: ClientRegistration,
        token: Secret,
        hint: Literal["refresh_token", "access_token"],
        policy: FetchPolicy,
        *,
        key: SigningKey | None = None,
    ) -> bool:
        """Revoke ``token`` (RFC 7009); ``False`` when the server offers no revocation."""
        request = revocation_request(
            server,
            registration,
            token,
            hint,
            key=key,
            now=self._clock(),
            random=secrets.token_bytes,
        )
        if request is None:
            return False
        check_revocation(await self.execute(request, policy), server)
        return True
