"""Key files as tools write them: an RSA key whose parts do not belong together is
refused when it is read, saying which part, never its value; the blocks ``openssl``
writes beside a key (the curve's parameters, a certificate) are passed over, and two
private keys in one file are refused."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

from protocol.oauth import OAuthConfigError, load_signing_key
from protocol.oauth.jws import es256_sign, rs256_sign
from protocol.oauth.keys import EcPrivateKey, RsaPrivateKey
from tests.support.oauth.rsa_parts import PARTS, PRIVATE, jwk, pkcs1_pem

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


def openssl(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "key.pem"
    subprocess.run(["openssl", *args, "-out", str(out)], check=True, capture_output=True)
    return out.read_text()


def test_the_key_openssl_ecparam_genkey_writes_loads_and_signs(tmp_path: Path) -> None:
    # Without -noout, the curve's parameters come first.
    text = openssl(tmp_path, "ecparam", "-name", "prime256v1", "-genkey")
    assert text.startswith("-----BEGIN EC PARAMETERS-----")
    key = load_signing_key(text)
    assert isinstance(key, EcPrivateKey)
    loaded = serialization.load_pem_private_key(text.encode(), None)
    assert isinstance(loaded, ec.EllipticCurvePrivateKey)
    signature = es256_sign(key, b"m")
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    loaded.public_key().verify(utils.encode_dss_signature(r, s), b"m", ec.ECDSA(hashes.SHA256()))


def test_a_certificate_beside_the_key_is_passed_over(tmp_path: Path) -> None:
    key_text = openssl(tmp_path, "ecparam", "-name", "prime256v1", "-genkey", "-noout")
    (tmp_path / "k.pem").write_text(key_text)
    key, cert = str(tmp_path / "k.pem"), str(tmp_path / "c.pem")
    request = ["req", "-new", "-x509", "-key", key, "-subj", "/CN=x", "-days", "1"]
    subprocess.run(["openssl", *request, "-out", cert], check=True, capture_output=True)
    bundle = (tmp_path / "c.pem").read_text() + key_text
    assert isinstance(load_signing_key(bundle), EcPrivateKey)


def test_two_private_keys_in_one_file_are_refused(tmp_path: Path) -> None:
    first = openssl(tmp_path, "ecparam", "-name", "prime256v1", "-genkey")
    second = openssl(tmp_path, "ecparam", "-name", "prime256v1", "-genkey")
    with pytest.raises(OAuthConfigError) as info:
        load_signing_key(first + second)
    assert str(info.value) == (
        "the PEM text holds 2 private keys; keep only the one mcpd is to sign with"
    )


def test_blocks_with_no_private_key_are_named(tmp_path: Path) -> None:
    params = openssl(tmp_path, "ecparam", "-name", "prime256v1")
    with pytest.raises(OAuthConfigError) as info:
        load_signing_key(params)
    assert str(info.value) == "PEM 'EC PARAMETERS' is not a private key mcpd can use"
    public = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with pytest.raises(OAuthConfigError) as info:
        load_signing_key(params + public)
    assert str(info.value) == (
        "PEM 'EC PARAMETERS', 'PUBLIC KEY': none of them is a private key mcpd can use"
    )
