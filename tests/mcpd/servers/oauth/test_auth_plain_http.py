"""A server at a plain ``http://`` URL off this machine: no login starts there, since
every token request and token would cross the network in clear; the refusal names
the URL and nothing is fetched."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.servers.oauth.errors import LoginError
from mcpd.servers.oauth.login import Login
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, server_auth

SERVER = "http://mcp.example.com/mcp"
PRM = "http://mcp.example.com/.well-known/oauth-protected-resource/mcp"


async def test_no_login_starts_for_a_plain_http_server_off_loopback(tmp_path: Path) -> None:
    world = FakeWorld(server_url=SERVER, issuer="http://mcp.example.com", prm_url=PRM)
    auth, _ = server_auth(tmp_path, world, Clock())
    with pytest.raises(LoginError) as caught:
        await Login(auth).begin(REDIRECT)
    assert f'"{PRM}" must use https' in str(caught.value)
    assert world.urls() == []
    assert auth.creds.header is None
