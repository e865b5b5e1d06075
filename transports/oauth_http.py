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
as ``transports.base.TransportError``, refusals of the policy as
``protocol.oauth.BlockedUrl``, and everything the core finds wrong as the core's
``OAuthError`` subclasses.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, Literal
from urllib.parse import urljoin, urlsplit

import h11
import trio

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
    carries_state,
    check_revocation,
    parse_token_response,
    refresh_request,
    revocation_request,
)
from protocol.oauth.http import MAX_BODY
from protocol.oauth.ssrf import is_loopback_host, parse_address
from protocol.oauth.urls import parse_http_url
from protocol.urls import display_url

from ._httpconn import HttpConnection, Origin, check_header, make_ssl_context
from .base import TransportError

__all__ = ["OAuthHttp", "RedirectListener", "Resolver", "redirect_listener", "system_resolver"]

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

    async def policy_for(
        self,
        server_url: str,
        *,
        allow_loopback: bool | None = None,
        allow_private: bool | None = None,
    ) -> FetchPolicy:
        """The fetch policy for discovery on behalf of ``server_url``, from the
        addresses its host resolves to now; the flags override what that implies."""
        u = parse_http_url(server_url, "server URL")
        policy = FetchPolicy.for_server(server_url, await self._resolve(u.host, u.port))
        return FetchPolicy(
            allow_loopback=policy.allow_loopback if allow_loopback is None else allow_loopback,
            allow_private=policy.allow_private if allow_private is None else allow_private,
            allow_link_local=policy.allow_link_local,
            http_origins=policy.http_origins,
        )

    async def execute(self, request: HttpRequest, policy: FetchPolicy) -> HttpResponse:
        """One request, within the client's per-request deadline."""
        limit = self._timeout
        with trio.move_on_after(limit) as scope:
            return await self._execute(request, policy)
        assert scope.cancelled_caught
        raise TransportError(
            f"{self.label}: {request.purpose} to {display_url(request.url)} timed out "
            f"after {limit:g} s"
        )

    async def _execute(self, request: HttpRequest, policy: FetchPolicy) -> HttpResponse:
        u = policy.check_url(request.url, request.purpose)
        allowed = policy.check_addresses(
            request.url, await self._resolve(u.host, u.port), request.purpose
        )
        origin = Origin(u.scheme, u.host, u.port)
        headers = [("Host", origin.authority), ("User-Agent", _USER_AGENT), *request.headers]
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
            head = await conn.receive_head()
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

    async def follow_authorization(self, url: str, policy: FetchPolicy) -> str:
        """GET an authorization URL and return where it redirects: the browser step
        for an authorization server that approves at once (test servers, the
        conformance suite's mock). A real one shows a login page instead."""
        response = await self.execute(HttpRequest("GET", url, (), b"", "authorization"), policy)
        location = response.header("location")
        if not 300 <= response.status < 400 or not location:
            raise TransportError(
                f"{self.label}: the authorization endpoint answered HTTP {response.status} "
                "instead of redirecting; a person has to log in in a browser"
            )
        return urljoin(url, location)


_DONE_PAGE: Final = (
    b"<!doctype html><title>mcpd</title>"
    b"<p>mcpd received the authorization. You can close this window.</p>"
)
_NOT_THIS_LOGIN: Final = (
    b"This is not the answer to the login mcpd is waiting for; it was ignored.\n"
)
# A connection that has not sent a whole request by then is closed: whoever can
# reach the port must not be able to hold connections open for the whole login.
REQUEST_TIMEOUT: Final = 10.0


class RedirectListener:
    """Where the browser comes back to after the user authorized.

    Any local user can reach a loopback port, so only a GET on the callback path
    that carries the login's own ``state`` (``expect``) is taken: anything else gets
    an error page and the listener keeps listening, until its owner stops waiting."""

    def __init__(self, redirect_uri: str, path: str) -> None:
        self.redirect_uri = redirect_uri
        self._path = path
        self._state: str | None = None
        self._target: str | None = None
        self._received = trio.Event()

    def expect(self, state: str) -> None:
        """The ``state`` of the authorization request the browser was sent with."""
        self._state = state

    async def wait(self) -> str:
        """The request target of the redirect (path and query), once it arrives."""
        await self._received.wait()
        assert self._target is not None
        return self._target

    def _answer(self, method: bytes, target: str) -> tuple[int, str, bytes]:
        if method != b"GET" or urlsplit(target).path != self._path:
            return 404, "text/plain; charset=utf-8", b"not found\n"
        if self._target is not None and target == self._target:
            return 200, "text/html; charset=utf-8", _DONE_PAGE  # the browser, reloading
        if self._target is None and self._state and carries_state(target, self._state):
            self._target = target
            self._received.set()
            return 200, "text/html; charset=utf-8", _DONE_PAGE
        return 400, "text/plain; charset=utf-8", _NOT_THIS_LOGIN

    async def _serve(self, stream: trio.abc.Stream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        data = await stream.receive_some(16384)
                        if not data:
                            return
                        conn.receive_data(bytes(data))
                        continue
                    if not isinstance(event, h11.Request):
                        return
                    target = event.target.decode("ascii", "replace")
                    status, kind, body = self._answer(event.method, target)
                    headers = [
                        ("Content-Type", kind),
                        ("Content-Length", str(len(body))),
                        ("Connection", "close"),
                        ("Cache-Control", "no-store"),
                    ]
                    data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
                    data += conn.send(h11.Data(data=body)) or b""
                    data += conn.send(h11.EndOfMessage()) or b""
                    await stream.send_all(data)
                    return
        except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)


@contextlib.asynccontextmanager
async def redirect_listener(
    *, host: str = "127.0.0.1", port: int = 0, path: str = "/callback"
) -> AsyncIterator[RedirectListener]:
    """Listen on a loopback address for the authorization redirect (RFC 8252 §7.3).

    ``listener.redirect_uri`` is what to register and send; the port is the one
    given, or a free one. The listener stops when the block ends."""
    if parse_address(host) is None or not is_loopback_host(host):
        raise ValueError("the redirect listener needs a loopback IP address (RFC 8252 §8.3)")
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    listener = RedirectListener(f"http://{shown}:{bound}{path}", path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, listener._serve, listeners)
        try:
            yield listener
        finally:
            nursery.cancel_scope.cancel()
