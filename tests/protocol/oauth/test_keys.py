"""Key reading and JWS signing, checked against RFC test vectors and against the
``cryptography`` package (installed with the test extra, via trustme)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from protocol.oauth import OAuthConfigError, load_signing_key
from protocol.oauth.jws import (
    client_assertion,
    encode_jwt,
    es256_sign,
    rs256_sign,
)
from protocol.oauth.keys import EcPrivateKey, RsaPrivateKey
from tests.support.oauth.fake import counter_random

# RFC 6979 A.2.5: P-256 key, SHA-256, message "sample".
RFC6979_D = 0xC9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721
RFC6979_R = "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716"
RFC6979_S = "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"


def _pem(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, fmt: serialization.PrivateFormat
) -> str:
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


def test_es256_matches_rfc_6979() -> None:
    key = EcPrivateKey(RFC6979_D)
    assert es256_sign(key, b"sample").hex().upper() == RFC6979_R + RFC6979_S


@pytest.mark.parametrize(
    "fmt", [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL]
)
def test_es256_from_pem_verifies_with_cryptography(fmt: serialization.PrivateFormat) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key = load_signing_key(_pem(private, fmt))
    assert isinstance(key, EcPrivateKey)
    signature = es256_sign(key, b"message")
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    private.public_key().verify(
        utils.encode_dss_signature(r, s), b"message", ec.ECDSA(hashes.SHA256())
    )


@pytest.mark.parametrize(
    "fmt", [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL]
)
def test_rs256_from_pem_verifies_with_cryptography(fmt: serialization.PrivateFormat) -> None:
    private = rsa.generate_private_key(65537, 2048)
    key = load_signing_key(_pem(private, fmt), kid="k1")
    assert isinstance(key, RsaPrivateKey) and key.kid == "k1"
    private.public_key().verify(rs256_sign(key, b"m"), b"m", padding.PKCS1v15(), hashes.SHA256())


def _b64(n: int) -> str:
    return (
        base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
    )


def test_keys_from_jwk() -> None:
    ec_private = ec.generate_private_key(ec.SECP256R1())
    d = ec_private.private_numbers().private_value
    key = load_signing_key(json.dumps({"kty": "EC", "crv": "P-256", "d": _b64(d), "kid": "e1"}))
    assert isinstance(key, EcPrivateKey) and key.scalar == d and key.kid == "e1"

    private = rsa.generate_private_key(65537, 2048)
    n = private.private_numbers()
    jwk = {
        "kty": "RSA",
        "n": _b64(n.public_numbers.n),
        "e": _b64(n.public_numbers.e),
        "d": _b64(n.d),
    }
    plain = load_signing_key(json.dumps(jwk))
    crt = load_signing_key(
        json.dumps(
            {
                **jwk,
                "p": _b64(n.p),
                "q": _b64(n.q),
                "dp": _b64(n.dmp1),
                "dq": _b64(n.dmq1),
                "qi": _b64(n.iqmp),
            }
        )
    )
    assert isinstance(plain, RsaPrivateKey) and isinstance(crt, RsaPrivateKey)
    assert plain.crt is None and crt.crt is not None
    assert rs256_sign(plain, b"x") == rs256_sign(crt, b"x")  # PKCS#1 v1.5 is deterministic


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not a key", "neither PEM nor a JWK"),
        ("{not json", "not valid JSON"),
        ('{"kty": "EC", "crv": "P-384", "d": "AQ"}', "P-256"),
        ('{"kty": "OKP", "crv": "Ed25519", "d": "AQ"}', "not supported"),
        ('{"kty": "EC", "crv": "P-256"}', "'d'"),
        ('{"kty": "EC", "crv": "P-256", "d": "AA"}', "not a valid P-256 scalar"),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----",
            "encrypted",
        ),
        ("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", "not a private key"),
        ("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----", "not valid base64"),
        ("-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----", "cannot be read"),
    ],
)
def test_unusable_keys(text: str, match: str) -> None:
    with pytest.raises(OAuthConfigError, match=match):
        load_signing_key(text)


def test_small_rsa_keys_and_other_curves_are_refused() -> None:
    small = rsa.generate_private_key(65537, 1024)
    with pytest.raises(OAuthConfigError, match="at least 2048"):
        load_signing_key(_pem(small, serialization.PrivateFormat.PKCS8))
    p384 = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(OAuthConfigError, match="P-256"):
        load_signing_key(_pem(p384, serialization.PrivateFormat.PKCS8))


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_jwt_and_client_assertion() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key = load_signing_key(_pem(private, serialization.PrivateFormat.PKCS8), kid="kid-1")
    token = client_assertion(
        client_id="conformance-test-client",
        audience="http://localhost:3001",
        key=key,
        now=1_700_000_000.5,
        random=counter_random(),
    )
    header_b64, claims_b64, sig_b64 = token.split(".")
    header = json.loads(_unb64(header_b64))
    claims = json.loads(_unb64(claims_b64))
    assert header == {"alg": "ES256", "kid": "kid-1", "typ": "JWT"}
    assert claims["iss"] == claims["sub"] == "conformance-test-client"
    assert claims["aud"] == "http://localhost:3001"
    assert (claims["iat"], claims["exp"]) == (1_700_000_000, 1_700_000_120)
    assert claims["jti"]
    signature = _unb64(sig_b64)
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    private.public_key().verify(
        utils.encode_dss_signature(r, s),
        f"{header_b64}.{claims_b64}".encode(),
        ec.ECDSA(hashes.SHA256()),
    )
    again = encode_jwt({"a": 1}, key)
    assert again == encode_jwt({"a": 1}, key)  # RFC 6979 nonces: the same input signs the same
