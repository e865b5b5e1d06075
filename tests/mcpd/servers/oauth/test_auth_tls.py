"""A server's relaxed TLS settings (``tls_verify = false``, its own ``ca_file``) are for
its own origin: the MCP endpoint and whatever OAuth request goes to the same scheme,
host and port. An authorization server elsewhere is verified the default way, so a
token request there with a certificate only that ``ca_file`` trusts is refused, and
the login says it was TLS."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from tests.support.clients.agent import connect, make_config, running
from tests.support.http_servers.serving import serve_http
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.protected_mcp import ProtectedMcp
from transports.http.oauth_client import OAuthHttp

LIMIT = 20


def tls_server(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    return ctx


@pytest.mark.parametrize("relaxed", ["tls_verify", "ca_file"])
async def test_relaxed_tls_stays_with_the_servers_own_origin(tmp_path: Path, relaxed: str) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    settings: dict[str, Any] = (
        {"tls_verify": False} if relaxed == "tls_verify" else {"ca_file": str(ca_file)}
    )
    srv = ProtectedMcp()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(srv, ssl_context=tls_server(ca)) as own,
            serve_http(srv, ssl_context=tls_server(ca)) as elsewhere,
        ):
            srv._http = own
            # Discovery, registration and the authorization endpoint are on the server's
            # origin; the token endpoint is on another one.
            token_url = elsewhere.url("/token")
            srv.metadata_extra = {"token_endpoint": token_url}
            servers = {"t": {"url": srv.mcp_url, **settings}}
            config = make_config(tmp_path, servers, state_dir=str(tmp_path / "state"))
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                row = (await agent.result("mcpd/status"))["servers"][0]
                assert row["state"] == "needs_login"  # the endpoint itself was reached
                start = await agent.result(
                    "mcpd/auth/login",
                    {"server": "t", "redirect_uri": "http://127.0.0.1:33420/callback"},
                )
                browser = OAuthHttp(ca_file=str(ca_file))
                landed = await follow_authorization(
                    browser, start["url"], await browser.policy_for(srv.mcp_url)
                )
                done = {"server": "t", "login": start["login"], "redirect": landed}
                refused = await agent.rpc("mcpd/auth/complete", done)
                (auth,) = (await agent.result("mcpd/auth/status"))["servers"]
    assert "error" in refused, f"the token request went to {elsewhere.url('')}: {refused}"
    message = refused["error"]["message"]
    assert message.startswith("t: that redirect did not log in: "), message
    assert f"token request: TLS failure with https://127.0.0.1:{elsewhere.port}" in message
    assert "CERTIFICATE_VERIFY_FAILED" in message
    assert f"tls_verify and ca_file apply to https://127.0.0.1:{own.port} only" in message
    assert auth["state"] == "needs_login"
    assert elsewhere.requests == []  # no form with a code and a verifier went there
    assert srv.grants["authorization_code"] == 0
    paths = [r.target.split("?")[0] for r in own.requests]
    assert "/.well-known/oauth-authorization-server" in paths and "/register" in paths
