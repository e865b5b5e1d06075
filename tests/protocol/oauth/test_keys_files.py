"""Key files as tools write them: an RSA key whose parts do not belong together is
refused when it is read, saying which part, never its value."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from protocol.oauth import OAuthConfigError, load_signing_key
from protocol.oauth.jws import rs256_sign
from protocol.oauth.keys import RsaPrivateKey
from tests.support.rsa_parts import PARTS, PRIVATE, jwk, pkcs1_pem

WRONG = {
    "d": "its private exponent d does not undo its public exponent e",
    "dp": "its CRT exponents dp and dq do not match e",
    "dq": "its CRT exponents dp and dq do not match e",
    "qi": "its CRT coefficient qi is not the inverse of q",
    "p": "its primes p and q do not multiply to its modulus n",
}


def test_a_consistent_rsa_key_loads_in_either_form() -> None:
    for text in (pkcs1_pem(PARTS), jwk(PARTS)):
        key = load_signing_key(text)
        assert isinstance(key, RsaPrivateKey)
        PRIVATE.public_key().verify(
            rs256_sign(key, b"m"), b"m", padding.PKCS1v15(), hashes.SHA256()
        )


@pytest.mark.parametrize("part", sorted(WRONG))
@pytest.mark.parametrize("form", [pkcs1_pem, jwk], ids=["pem", "jwk"])
def test_an_rsa_key_whose_parts_do_not_match_is_refused_when_read(
    part: str, form: Callable[[dict[str, int]], str]
) -> None:
    broken = {**PARTS, part: PARTS[part] + 2}
    with pytest.raises(OAuthConfigError) as info:
        load_signing_key(form(broken))
    message = str(info.value)
    assert message == f"the RSA key is inconsistent: {WRONG[part]}"
    assert not any(str(v)[:12] in message for v in broken.values() if v > 10**12)


def test_a_jwk_without_crt_parts_is_checked_for_its_private_exponent() -> None:
    plain = {k: PARTS[k] for k in ("n", "e", "d")}
    assert isinstance(load_signing_key(jwk(plain)), RsaPrivateKey)
    with pytest.raises(OAuthConfigError, match="private exponent d does not undo"):
        load_signing_key(jwk({**plain, "d": plain["d"] + 2}))
