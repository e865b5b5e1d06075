"""A signing key that fails when it signs (its parts checked when read, but made in a
way no check saw) is the server's authentication failing with the reason, not an
internal error that would restart the server again and again."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import mcpd.servers.oauth.credentials as credentials
from mcpd.servers.oauth import AuthFailed
from protocol.oauth.keys import RsaPrivateKey, SigningKey
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import Clock, server_auth, unauthorized

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


async def test_a_key_that_cannot_sign_fails_the_servers_authentication_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = rsa.generate_private_key(65537, 2048)
    numbers = private.private_numbers()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    broken = RsaPrivateKey(numbers.public_numbers.n, numbers.public_numbers.e, numbers.d + 2)

    def loaded(text: str, *, kid: str | None = None) -> SigningKey:
        return broken

    monkeypatch.setattr(credentials, "load_signing_key", loaded)
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = ["private_key_jwt"]
    auth, _ = server_auth(
        tmp_path,
        world,
        Clock(),
        auth={
            "type": "client_credentials",
            "client_id": "machine",
            "private_key": pem,
            "issuer": world.metadata["issuer"],
        },
    )
    with pytest.raises(AuthFailed) as caught:
        await auth.refused(unauthorized(f'Bearer resource_metadata="{PRM}"'), None)
    assert caught.value.reason == (
        "cannot get an access token: the RSA key is inconsistent (its parts do not match)"
    )
    assert world.sent_to(world.metadata["token_endpoint"]) == []
