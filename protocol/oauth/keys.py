"""Private keys for ``private_key_jwt`` client authentication, read without OpenSSL.

Accepted forms: PEM ``PRIVATE KEY`` (PKCS#8, EC P-256 or RSA), ``EC PRIVATE KEY``
(SEC1), ``RSA PRIVATE KEY`` (PKCS#1), and a JWK (``kty`` ``EC`` with ``crv``
``P-256``, or ``RSA``) as JSON text. PEM blocks beside the one private key (``EC
PARAMETERS``, a certificate) are passed over; two private keys are refused. Encrypted
PEM is refused with a message that says so; decrypt it first. Only the DER needed for
these structures is parsed. An RSA key's parts are checked to belong together.

A key never shows itself: ``repr()`` names the algorithm and ``kid`` only.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Final

from .errors import OAuthConfigError

_OID_EC: Final = bytes.fromhex("2a8648ce3d0201")  # 1.2.840.10045.2.1 id-ecPublicKey
_OID_P256: Final = bytes.fromhex("2a8648ce3d030107")  # 1.2.840.10045.3.1.7 prime256v1
_OID_RSA: Final = bytes.fromhex("2a864886f70d010101")  # 1.2.840.113549.1.1.1 rsaEncryption
_PEM: Final = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.DOTALL)
# P-256 group order; a private scalar must lie in [1, n-1].
P256_ORDER: Final = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


class EcPrivateKey:
    """A P-256 private key (ES256)."""

    __slots__ = ("_d", "kid")
    alg: Final = "ES256"

    def __init__(self, d: int, kid: str | None = None) -> None:
        if not 1 <= d < P256_ORDER:
            raise OAuthConfigError("the EC private key is not a valid P-256 scalar")
        self._d = d
        self.kid = kid

    @property
    def scalar(self) -> int:
        return self._d

    def __repr__(self) -> str:
        return f"EcPrivateKey(ES256, kid={self.kid!r})"


class RsaPrivateKey:
    """An RSA private key (RS256); the CRT parts are used when given."""

    __slots__ = ("_crt", "_d", "e", "kid", "n")
    alg: Final = "RS256"

    def __init__(
        self,
        n: int,
        e: int,
        d: int,
        crt: tuple[int, int, int, int, int] | None = None,  # p, q, dp, dq, qinv
        kid: str | None = None,
    ) -> None:
        if n.bit_length() < 2048:
            raise OAuthConfigError(
                f"the RSA key has {n.bit_length()} bits; RS256 needs at least 2048"
            )
        self.n = n
        self.e = e
        self._d = d
        self._crt = crt
        self.kid = kid

    @property
    def private_exponent(self) -> int:
        return self._d

    @property
    def crt(self) -> tuple[int, int, int, int, int] | None:
        return self._crt

    def __repr__(self) -> str:
        return f"RsaPrivateKey(RS256, {self.n.bit_length()} bits, kid={self.kid!r})"


SigningKey = EcPrivateKey | RsaPrivateKey


class _Der:
    """Just enough DER: definite lengths, one TLV at a time."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def read(self, tag: int | None = None) -> tuple[int, bytes]:
        d = self.data
        if self.pos + 2 > len(d):
            raise ValueError("truncated DER")
        got = d[self.pos]
        length = d[self.pos + 1]
        self.pos += 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4 or self.pos + count > len(d):
                raise ValueError("bad DER length")
            length = int.from_bytes(d[self.pos : self.pos + count], "big")
            self.pos += count
        if self.pos + length > len(d):
            raise ValueError("truncated DER")
        value = d[self.pos : self.pos + length]
        self.pos += length
        if tag is not None and got != tag:
            raise ValueError(f"expected DER tag {tag:#x}, found {got:#x}")
        return got, value

    def integer(self) -> int:
        return int.from_bytes(self.read(0x02)[1], "big", signed=True)

    def sequence(self) -> _Der:
        return _Der(self.read(0x30)[1])


def _ec_sec1(der: bytes, kid: str | None) -> EcPrivateKey:
    seq = _Der(der).sequence()
    if seq.integer() != 1:
        raise ValueError("unknown ECPrivateKey version")
    scalar = seq.read(0x04)[1]
    while seq.more():
        tag, value = seq.read()
        if tag == 0xA0 and _Der(value).read(0x06)[1] != _OID_P256:
            raise OAuthConfigError("the EC key is not on the P-256 curve (ES256 needs P-256)")
    return EcPrivateKey(int.from_bytes(scalar, "big"), kid)


def _rsa_pkcs1(der: bytes, kid: str | None) -> RsaPrivateKey:
    seq = _Der(der).sequence()
    if seq.integer() != 0:
        raise OAuthConfigError("multi-prime RSA keys are not supported")
    n, e, d, p, q, dp, dq, qinv = (seq.integer() for _ in range(8))
    return _consistent(RsaPrivateKey(n, e, d, (p, q, dp, dq, qinv), kid))


def _consistent(key: RsaPrivateKey) -> RsaPrivateKey:
    """``key``, once its parts are found to belong together: a key whose parts do not
    would sign nothing (``jws.rs256_sign`` releases no signature that does not verify),
    which is better said when the key is read than at its first use. Says which part is
    wrong, never its value."""
    n, e, d = key.n, key.e, key.private_exponent
    if n % 2 == 0 or e < 3 or e % 2 == 0 or e >= n:
        raise OAuthConfigError(
            "the RSA key is inconsistent: its public exponent e or modulus n is none RSA uses"
        )
    if key.crt is not None:
        p, q, dp, dq, qinv = key.crt
        if p < 3 or q < 3 or p * q != n:
            raise OAuthConfigError(
                "the RSA key is inconsistent: its primes p and q do not multiply to its modulus n"
            )
        if dp * e % (p - 1) != 1 or dq * e % (q - 1) != 1:
            raise OAuthConfigError(
                "the RSA key is inconsistent: its CRT exponents dp and dq do not match e"
            )
        if qinv * q % p != 1:
            raise OAuthConfigError(
                "the RSA key is inconsistent: its CRT coefficient qi is not the inverse of q"
            )
    # One round trip of a small number: a d that does not match e fails it, unless
    # e*d - 1 happens to be a multiple of the number's order modulo n, which no slip in
    # a key file makes.
    probe = 2
    if not 1 < d < n or pow(pow(probe, e, n), d, n) != probe:
        raise OAuthConfigError(
            "the RSA key is inconsistent: its private exponent d does not undo its "
            "public exponent e"
        )
    return key


def _pkcs8(der: bytes, kid: str | None) -> SigningKey:
    seq = _Der(der).sequence()
    seq.integer()  # version 0 or 1
    alg = seq.sequence()
    oid = alg.read(0x06)[1]
    private = seq.read(0x04)[1]
    if oid == _OID_EC:
        if alg.more() and alg.read(0x06)[1] != _OID_P256:
            raise OAuthConfigError("the EC key is not on the P-256 curve (ES256 needs P-256)")
        return _ec_sec1(private, kid)
    if oid == _OID_RSA:
        return _rsa_pkcs1(private, kid)
    raise OAuthConfigError("the private key is neither EC P-256 nor RSA")


def _b64url_int(jwk: dict[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise OAuthConfigError(f"the JWK has no {name!r} member")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise OAuthConfigError(f"the JWK member {name!r} is not base64url") from None
    return int.from_bytes(raw, "big")


def _from_jwk(jwk: dict[str, Any], kid: str | None) -> SigningKey:
    kid = kid or (jwk["kid"] if isinstance(jwk.get("kid"), str) else None)
    kty = jwk.get("kty")
    if kty == "EC":
        if jwk.get("crv") != "P-256":
            raise OAuthConfigError("the EC JWK is not on the P-256 curve (ES256 needs P-256)")
        return EcPrivateKey(_b64url_int(jwk, "d"), kid)
    if kty == "RSA":
        n, e, d = (_b64url_int(jwk, k) for k in ("n", "e", "d"))
        crt = None
        if all(k in jwk for k in ("p", "q", "dp", "dq", "qi")):
            p, q, dp, dq, qi = (_b64url_int(jwk, k) for k in ("p", "q", "dp", "dq", "qi"))
            crt = (p, q, dp, dq, qi)
        return _consistent(RsaPrivateKey(n, e, d, crt, kid))
    raise OAuthConfigError(f"JWK key type {kty!r} is not supported (use EC P-256 or RSA)")


def load_signing_key(text: str, *, kid: str | None = None) -> SigningKey:
    """A private key from PEM or JWK text (see the module docstring)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            jwk = json.loads(stripped)
        except ValueError:
            raise OAuthConfigError("the key looks like a JWK but is not valid JSON") from None
        if not isinstance(jwk, dict):
            raise OAuthConfigError("the JWK must be a JSON object")
        return _from_jwk(jwk, kid)
    blocks = [(m.group(1), m.group(2)) for m in _PEM.finditer(stripped)]
    if not blocks:
        raise OAuthConfigError("the key is neither PEM nor a JWK")
    # Other blocks may come with the key: ``openssl ecparam -genkey`` writes the
    # curve's parameters before it, a bundle a certificate beside it.
    keys = [(label, body) for label, body in blocks if label.endswith("PRIVATE KEY")]
    if not keys:
        if len(blocks) == 1:
            raise OAuthConfigError(f"PEM {blocks[0][0]!r} is not a private key mcpd can use")
        labels = ", ".join(repr(label) for label, _ in blocks)
        raise OAuthConfigError(f"PEM {labels}: none of them is a private key mcpd can use")
    if len(keys) > 1:
        raise OAuthConfigError(
            f"the PEM text holds {len(keys)} private keys; keep only the one mcpd is to sign with"
        )
    ((label, body),) = keys
    if "ENCRYPTED" in label or "Proc-Type:" in body:
        raise OAuthConfigError("the private key is encrypted; store it decrypted (mode 0600)")
    try:
        der = base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        raise OAuthConfigError("the PEM body is not valid base64") from None
    readers = {"PRIVATE KEY": _pkcs8, "EC PRIVATE KEY": _ec_sec1, "RSA PRIVATE KEY": _rsa_pkcs1}
    reader = readers.get(label)
    if reader is None:
        raise OAuthConfigError(f"PEM {label!r} is not a private key mcpd can use")
    try:
        return reader(der, kid)
    except ValueError as exc:
        raise OAuthConfigError(f"the {label} cannot be read: {exc}") from None
