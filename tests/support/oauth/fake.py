"""A resource server and authorization server as plain functions, for the sans-IO
OAuth tests: requests in, responses out, every request recorded, no sockets.

The defaults mirror what the conformance suite's mocks serve (path-based resource
metadata named in the challenge, metadata at the issuer's oauth-authorization-server
URL, PKCE S256, registration, an authorization endpoint that approves at once);
each test changes what it is about.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from protocol.oauth import (
    AuthorizationFlow,
    AuthorizationResult,
    Authorized,
    HttpRequest,
    HttpResponse,
    OpenBrowser,
    SendRequest,
)

Handler = Callable[[HttpRequest], HttpResponse]


def json_response(
    obj: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
) -> HttpResponse:
    return HttpResponse(
        status, (("content-type", "application/json"), *headers), json.dumps(obj).encode()
    )


NOT_FOUND = HttpResponse(404, (("content-type", "text/plain"),), b"not found")


def s256(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


class FakeWorld:
    def __init__(
        self,
        *,
        server_url: str = "https://mcp.example.com/mcp",
        issuer: str = "https://auth.example.com",
        metadata_url: str | None = None,
        prm_url: str | None = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
    ) -> None:
        self.server_url = server_url
        self.issuer = issuer
        self.metadata_url = metadata_url or f"{issuer}/.well-known/oauth-authorization-server"
        self.prm_url = prm_url
        self.prm: dict[str, Any] = {"resource": server_url, "authorization_servers": [issuer]}
        self.metadata: dict[str, Any] = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "revocation_endpoint": f"{issuer}/revoke",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": True,
        }
        self.registration: dict[str, Any] = {"client_id": "dyn-client"}
        self.token: dict[str, Any] = {
            "access_token": "at-1",
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": "rt-1",
        }
        self.token_status = 200
        self.iss_mode = "correct"  # correct | omit | wrong | normalized
        self.extra: dict[tuple[str, str], Handler] = {}
        self.requests: list[HttpRequest] = []
        self.authorize_queries: list[dict[str, str]] = []
        self.challenge_for_code: str | None = None

    def handle(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        key = (request.method, request.url)
        if key in self.extra:
            return self.extra[key](request)
        if request.method == "GET" and request.url == self.prm_url:
            return json_response(self.prm)
        if request.method == "GET" and request.url == self.metadata_url:
            return json_response(self.metadata)
        if request.method == "POST" and request.url == self.metadata.get("registration_endpoint"):
            body = json.loads(request.body)
            return json_response(
                {"redirect_uris": body.get("redirect_uris"), **self.registration}, 201
            )
        if request.method == "POST" and request.url == self.metadata.get("token_endpoint"):
            return json_response(self.token, self.token_status)
        if request.method == "POST" and request.url == self.metadata.get("revocation_endpoint"):
            return HttpResponse(200)
        return NOT_FOUND

    def authorize(self, url: str) -> str:
        """The browser and the user: approve at once, redirect back with a code."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        self.authorize_queries.append(query)
        self.challenge_for_code = query.get("code_challenge")
        params = [("code", "code-1"), ("state", query["state"])]
        if self.iss_mode == "correct":
            params.append(("iss", self.issuer))
        elif self.iss_mode == "wrong":
            params.append(("iss", "https://evil.example.com"))
        elif self.iss_mode == "normalized":
            params.append(("iss", self.issuer + "/"))
        return f"{query['redirect_uri']}?{urlencode(params)}"

    def form(self, request: HttpRequest) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(request.body.decode()).items()}

    def sent_to(self, url: str) -> list[HttpRequest]:
        return [r for r in self.requests if r.url == url]

    def urls(self) -> list[str]:
        return [r.url for r in self.requests]


def drive(flow: AuthorizationFlow, world: FakeWorld, now: float = 1000.0) -> AuthorizationResult:
    for _ in range(50):
        action = flow.next_action()
        if isinstance(action, SendRequest):
            flow.receive_response(world.handle(action.request), now)
        elif isinstance(action, OpenBrowser):
            flow.receive_redirect(world.authorize(action.url), now)
        else:
            assert isinstance(action, Authorized)
            return action.result
    raise AssertionError("the flow did not finish")


def counter_random() -> Callable[[int], bytes]:
    """A deterministic random source: 0x01 0x02 ... across calls."""
    state = {"n": 0}

    def take(count: int) -> bytes:
        out = bytes((state["n"] + i) % 256 for i in range(count))
        state["n"] += count
        return out

    return take
