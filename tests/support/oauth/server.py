"""A protected MCP endpoint and its authorization server in one in-process HTTP
server (h11 on trio, from ``http_servers.serving``), for the OAuth I/O tests.

It serves what a real deployment would: a 401 with a Bearer challenge on
``POST /mcp`` without a valid token, resource metadata, authorization-server
metadata, dynamic registration, an authorization endpoint that approves at once
(302 back to the redirect URI with code, state and iss), a token endpoint that
checks PKCE, ``resource`` and the client authentication it was configured for,
and revocation. Every request is recorded by the underlying ``HttpServer``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.support.http_servers.serving import (
    HttpServer,
    Responder,
    SeenRequest,
    result,
    serve_http,
)

_DRAWN = "Zq4vT8kP2mX7wR5nB9cL"


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _consented_offline(query: dict[str, str]) -> bool:
    return "offline_access" in query.get("scope", "").split() and query.get("prompt") == "consent"


class OAuthServer:
    def __init__(self) -> None:
        self._http: HttpServer | None = None
        # What to serve; tests change these before (or during) a run.
        self.auth_method = "none"  # what the token endpoint demands
        self.client_id = "registered-client"
        self.client_secret: str | None = None
        self.scopes_supported: list[str] | None = None
        self.challenge_scope: str | None = None
        self.prm_redirect = False  # answer the path-based resource metadata with a 302
        self.metadata_extra: dict[str, Any] = {}
        self.expires_in = 3600
        # As an OpenID provider: a refresh token only for an authorization request that
        # asked for offline_access with prompt=consent (OpenID Connect Core §11).
        self.refresh_needs_consent = False
        # As a server whose access tokens are self-contained: revocation refuses them.
        self.unrevocable_access = False
        # Answers the client credentials grant, with a refresh token too (as some servers
        # do, though RFC 6749 §4.4.3 advises against it).
        self.machine_grants = False
        # What happened.
        self.challenges: dict[str, str] = {}  # state -> code_challenge
        self.codes: dict[str, dict[str, str]] = {}
        self.codes_asked: list[dict[str, str]] = []  # every authorization request's query
        self.issued: list[str] = []
        self.scope_of: dict[str, str] = {}  # the scope each access token was asked with
        self.live_refresh: set[str] = set()  # refresh tokens rotate: each works once
        self.spent_refresh: set[str] = set()
        # Refresh tokens sent again after they were spent: a leak, for OAuth 2.1, so
        # every refresh token of the login is revoked.
        self.reused: list[str] = []
        self.revoked: list[str] = []
        self.token_forms: list[dict[str, str]] = []
        self.failures: list[str] = []
        self._serial = itertools.count(1)

    @property
    def http(self) -> HttpServer:
        assert self._http is not None, "the server is not running"
        return self._http

    @property
    def base(self) -> str:
        return self.http.url("")

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def prm_url(self) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource/mcp"

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "revocation_endpoint": f"{self.base}/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [self.auth_method],
            "authorization_response_iss_parameter_supported": True,
        }
        if self.machine_grants:
            doc["grant_types_supported"].append("client_credentials")
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        doc.update(self.metadata_extra)
        return doc

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        path = urlsplit(req.target).path
        route = (req.method, path)
        if route == ("POST", "/mcp"):
            await self._mcp(req, respond)
        elif route == ("GET", "/.well-known/oauth-protected-resource/mcp"):
            if self.prm_redirect:
                await respond.reply(302, headers=[("Location", "/elsewhere/prm")])
                return
            await respond.json({"resource": self.mcp_url, "authorization_servers": [self.base]})
        elif route == ("GET", "/.well-known/oauth-authorization-server"):
            await respond.json(self.metadata())
        elif route == ("POST", "/register"):
            body = json.loads(req.body)
            answer = {"client_id": self.client_id, "redirect_uris": body.get("redirect_uris", [])}
            if self.client_secret is not None:
                answer["client_secret"] = self.client_secret
            answer["token_endpoint_auth_method"] = self.auth_method
            await respond.json(answer, 201)
        elif route == ("GET", "/authorize"):
            await self._authorize(req, respond)
        elif route == ("POST", "/token"):
            await self._token(req, respond)
        elif route == ("POST", "/revoke"):
            token = self._form(req)["token"]
            if self.unrevocable_access and token in self.issued:
                description = "access tokens are not revoked here"
                answer = {"error": "unsupported_token_type", "error_description": description}
                await respond.json(answer, 400)
                return
            self.revoked.append(token)
            self.live_refresh.discard(token)
            await respond.reply(200)
        else:
            await respond.reply(404, "not found")

    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        auth = req.header("authorization") or ""
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or token not in self.issued:
            challenge = f'Bearer resource_metadata="{self.prm_url}"'
            if self.challenge_scope:
                challenge += f', scope="{self.challenge_scope}"'
            await respond.json(
                {"error": "invalid_token"}, 401, headers=[("WWW-Authenticate", challenge)]
            )
            return
        await respond.json(result(req.rpc_id, {"tools": []}))

    async def _authorize(self, req: SeenRequest, respond: Responder) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(req.target).query).items()}
        code = f"code-{next(self._serial)}"
        self.codes[code] = query
        self.codes_asked.append(query)
        redirect = query["redirect_uri"]
        params = urlencode({"code": code, "state": query["state"], "iss": self.base})
        await respond.reply(302, headers=[("Location", f"{redirect}?{params}")])

    def _form(self, req: SeenRequest) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(req.body.decode()).items()}

    def _authenticated(self, req: SeenRequest, form: dict[str, str]) -> str | None:
        """The client id, if the request authenticates the way this server demands."""
        header = req.header("authorization") or ""
        if self.auth_method == "client_secret_basic":
            if not header.startswith("Basic "):
                return None
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            return user if password == self.client_secret else None
        if header:
            return None
        if self.auth_method == "client_secret_post":
            return (
                form.get("client_id") if form.get("client_secret") == self.client_secret else None
            )
        return form.get("client_id")

    async def _token(self, req: SeenRequest, respond: Responder) -> None:
        form = self._form(req)
        self.token_forms.append(form)
        client = self._authenticated(req, form)
        if client != self.client_id:
            self.failures.append(f"client authentication failed ({self.auth_method})")
            await respond.json({"error": "invalid_client"}, 401)
            return
        grant = form.get("grant_type")
        offline = True
        if grant == "authorization_code":
            query = self.codes.pop(form.get("code", ""), None)
            offline = query is not None and _consented_offline(query)
            problems = []
            if query is None:
                problems.append("unknown code")
            else:
                if _s256(form.get("code_verifier", "")) != query.get("code_challenge"):
                    problems.append("PKCE verifier does not match")
                if form.get("resource") != query.get("resource"):
                    problems.append("resource differs from the authorization request")
                if form.get("redirect_uri") != query.get("redirect_uri"):
                    problems.append("redirect_uri differs")
            if problems:
                self.failures.extend(problems)
                await respond.json(
                    {"error": "invalid_grant", "error_description": problems[0]}, 400
                )
                return
        elif grant == "refresh_token":
            used = form.get("refresh_token", "")
            if used in self.spent_refresh:
                self.reused.append(used)
                self.live_refresh.clear()
            if used not in self.live_refresh:
                await respond.json({"error": "invalid_grant"}, 400)
                return
            self.live_refresh.discard(used)
            self.spent_refresh.add(used)
        elif grant != "client_credentials" or not self.machine_grants:
            await respond.json({"error": "unsupported_grant_type"}, 400)
            return
        n = next(self._serial)
        # As long as a real token: mcpd masks none that could be a word.
        access, refresh = f"access-{n}-{_DRAWN}", f"refresh-{n}-{_DRAWN}"
        self.issued.append(access)
        self.scope_of[access] = form.get("scope", "")
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
        }
        if offline or not self.refresh_needs_consent:
            self.live_refresh.add(refresh)
            answer["refresh_token"] = refresh
        await self._answer_tokens(respond, answer)

    async def _answer_tokens(self, respond: Responder, answer: dict[str, Any]) -> None:
        """The token response, once its tokens are recorded as issued."""
        await respond.json(answer)


@contextlib.asynccontextmanager
async def serve_oauth(
    server: OAuthServer | None = None, *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[OAuthServer]:
    server = server or OAuthServer()
    async with serve_http(server, ssl_context=ssl_context) as http:
        server._http = http
        yield server
