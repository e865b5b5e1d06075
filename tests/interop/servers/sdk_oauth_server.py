"""An OAuth-protected MCP server on the official Python SDK (v2): its authorization
server routes (metadata, dynamic registration, authorize, token, revocation), its
protected-resource metadata and its bearer middleware, all the SDK's own.

usage: python sdk_oauth_server.py PORT [--ttl SECONDS]

The SDK leaves storage to the application, so the provider below keeps clients,
codes and tokens in memory, approves every authorization at once (there is no
person at a login page in a test: the redirect goes straight back with the code),
issues access tokens that live ``--ttl`` seconds and rotates refresh tokens on
every use. Two routes are for the test alone: ``POST /test/revoke`` withdraws
every token (as a user revoking the app at the provider would), ``GET
/test/tokens`` lists every token ever issued and every client secret (for the test
that searches mcpd's outputs for them), with counts of clients and grants.
"""

from __future__ import annotations

import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class MemoryProvider:
    def __init__(self, ttl: int) -> None:
        self.ttl = ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: list[str] = []
        self.grants: dict[str, int] = {"authorization_code": 0, "refresh_token": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        expires = int(time.time()) + self.ttl
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        self.issued += [access, refresh]
        return OAuthToken(
            access_token=access,
            expires_in=self.ttl,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        self.grants["authorization_code"] += 1
        assert client.client_id is not None
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # each refresh token works once
        self.grants["refresh_token"] += 1
        assert client.client_id is not None
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build(port: int, ttl: int) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = MemoryProvider(ttl)
    app = MCPServer(
        "sdk-oauth-server",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=True,
            client_registration_options=ClientRegistrationOptions(enabled=True),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @app.tool()
    def whoami() -> str:
        """Answer when the caller's token is good."""
        return "authorized"

    @app.custom_route("/test/revoke", methods=["POST"])
    async def revoke(request: Request) -> Response:
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"revoked": True})

    @app.custom_route("/test/tokens", methods=["GET"])
    async def tokens(request: Request) -> Response:
        secrets_ = [c.client_secret for c in provider.clients.values() if c.client_secret]
        return JSONResponse(
            {
                "issued": provider.issued,
                "secrets": secrets_,
                "clients": len(provider.clients),
                "grants": provider.grants,
            }
        )

    return app


if __name__ == "__main__":
    port = int(sys.argv[1])
    ttl = int(sys.argv[sys.argv.index("--ttl") + 1]) if "--ttl" in sys.argv else 3600
    build(port, ttl).run("streamable-http", host="127.0.0.1", port=port)
