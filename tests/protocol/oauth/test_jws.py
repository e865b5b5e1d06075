"""The JWS signer behind ``private_key_jwt``: what it signs, that a signature it returns
always verifies, and that a broken key never yields a signature at all."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from protocol.oauth import OAuthConfigError
from protocol.oauth.jws import client_assertion, encode_jwt, es256_sign, rs256_sign, sign
from protocol.oauth.keys import EcPrivateKey, RsaPrivateKey
from tests.support.oauth.fake import counter_random
from tests.support.oauth.jws_check import es256_verifies

EC_KEY = EcPrivateKey(0xC9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721)


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rsa_pair(kid: str | None = None) -> tuple[rsa.RSAPrivateKey, RsaPrivateKey]:
    private = rsa.generate_private_key(65537, 2048)
    n = private.private_numbers()
    crt = (n.p, n.q, n.dmp1, n.dmq1, n.iqmp)
    return private, RsaPrivateKey(n.public_numbers.n, n.public_numbers.e, n.d, crt, kid=kid)


RSA_PRIVATE, RSA_KEY = _rsa_pair()


def test_an_es256_signature_of_another_message_or_key_does_not_verify() -> None:
    signature = es256_sign(EC_KEY, b"payload")
    assert es256_verifies(EC_KEY, b"payload", signature)
    assert not es256_verifies(EC_KEY, b"payloae", signature)
    assert not es256_verifies(EcPrivateKey(2), b"payload", signature)


def test_es256_signatures_are_always_64_bytes_with_leading_zeros_kept() -> None:
    # r or s below 2**248 happens once in about 128 signatures; the encoding must keep
    # its width, or a verifier reads r and s from the wrong bytes.
    short = None
    for i in range(2000):
        message = i.to_bytes(4, "big")
        signature = es256_sign(EC_KEY, message)
        assert len(signature) == 64
        if signature[0] == 0 or signature[32] == 0:
            short = (message, signature)
            break
    assert short is not None
    assert es256_verifies(EC_KEY, *short)


def test_rs256_signatures_have_the_modulus_width_even_with_a_leading_zero() -> None:
    size = (RSA_KEY.n.bit_length() + 7) // 8
    for i in range(3000):
        message = i.to_bytes(4, "big")
        signature = rs256_sign(RSA_KEY, message)
        assert len(signature) == size
        if signature[0] == 0:
            RSA_PRIVATE.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
            return
    pytest.fail("no signature with a leading zero byte among 3000")


def test_rs256_without_crt_parts_signs_the_same() -> None:
    plain = RsaPrivateKey(RSA_KEY.n, RSA_KEY.e, RSA_KEY.private_exponent)
    assert rs256_sign(plain, b"m") == rs256_sign(RSA_KEY, b"m")


def test_a_faulty_crt_part_gives_no_signature() -> None:
    # A wrong CRT result would let anyone who sees the signature factor the modulus. A
    # key read from text is checked as it is read; one that gets here all the same is
    # an error in the configuration, which the server's authentication reports.
    assert RSA_KEY.crt is not None
    p, q, dp, dq, qinv = RSA_KEY.crt
    broken = RsaPrivateKey(RSA_KEY.n, RSA_KEY.e, RSA_KEY.private_exponent, (p, q, dp + 1, dq, qinv))
    with pytest.raises(OAuthConfigError, match="inconsistent"):
        rs256_sign(broken, b"m")


def test_a_private_exponent_that_does_not_match_gives_no_signature() -> None:
    broken = RsaPrivateKey(RSA_KEY.n, RSA_KEY.e, RSA_KEY.private_exponent + 2)
    with pytest.raises(OAuthConfigError, match="inconsistent"):
        rs256_sign(broken, b"m")


def test_sign_picks_the_algorithm_of_the_key() -> None:
    assert sign(EC_KEY, b"m") == es256_sign(EC_KEY, b"m")
    assert sign(RSA_KEY, b"m") == rs256_sign(RSA_KEY, b"m")


def test_the_header_names_the_key_algorithm_and_kid_only_when_there_is_one() -> None:
    _, with_kid = _rsa_pair(kid="r1")
    header = json.loads(_unb64(encode_jwt({}, with_kid).split(".")[0]))
    assert header == {"alg": "RS256", "kid": "r1", "typ": "JWT"}
    header = json.loads(_unb64(encode_jwt({}, EC_KEY).split(".")[0]))
    assert header == {"alg": "ES256", "typ": "JWT"}


def test_claims_cannot_rewrite_the_header_or_break_the_compact_form() -> None:
    # Claim values come from config and from a server's metadata (the audience); JSON
    # escaping and base64url keep each inside its own segment.
    hostile = 'x","alg":"none"}.e30.'
    token = client_assertion(
        client_id=hostile + "\u2028\x00é",
        audience="https://as.example/" + hostile,
        key=EC_KEY,
        now=0,
        random=counter_random(),
    )
    header_b64, claims_b64, sig_b64 = token.split(".")
    assert json.loads(_unb64(header_b64)) == {"alg": "ES256", "typ": "JWT"}
    claims = json.loads(_unb64(claims_b64))
    assert claims["iss"] == claims["sub"] == hostile + "\u2028\x00é"
    assert claims["aud"] == "https://as.example/" + hostile
    assert es256_verifies(EC_KEY, f"{header_b64}.{claims_b64}".encode(), _unb64(sig_b64))


def test_each_assertion_has_its_own_jti_and_a_short_lifetime() -> None:
    random = counter_random()
    tokens = [
        client_assertion(
            client_id="c", audience="https://as.example", key=EC_KEY, now=1000.9, random=random
        )
        for _ in range(3)
    ]
    claims = [json.loads(_unb64(token.split(".")[1])) for token in tokens]
    assert len({c["jti"] for c in claims}) == 3
    assert all(len(_unb64(c["jti"])) == 16 for c in claims)
    assert all((c["iat"], c["exp"]) == (1000, 1120) for c in claims)
    shorter = client_assertion(
        client_id="c",
        audience="https://as.example",
        key=EC_KEY,
        now=1000,
        random=random,
        lifetime=30,
    )
    assert json.loads(_unb64(shorter.split(".")[1]))["exp"] == 1030
