"""JWS signatures for client assertions: ES256 (P-256 ECDSA) and RS256 (PKCS#1 v1.5).

Pure Python on ``int``: Jacobian point arithmetic for P-256 with deterministic
nonces (RFC 6979, HMAC-SHA256), so no random source can weaken a signature, and
RSA with the CRT parts and a check of the result before it is used. Python's big
integers are not constant-time; the signer is a local daemon signing a short-lived
assertion, not a service signing on demand for others.

``client_assertion`` builds the RFC 7523 ``private_key_jwt`` assertion: ``iss`` and
``sub`` are the client id, ``aud`` the authorization server's issuer identifier
(RFC 7523bis; the token endpoint URL was the older practice), a short lifetime and a
unique ``jti``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Final

from ..jsonrpc.messages import JsonObject
from .authorize import RandomSource, b64url
from .errors import OAuthConfigError
from .keys import EcPrivateKey, RsaPrivateKey, SigningKey

# NIST P-256 (SEC 2 secp256r1), a = -3.
_P: Final = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_N: Final = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_GX: Final = 0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296
_GY: Final = 0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5

_Jacobian = tuple[int, int, int]  # Z == 0 is the point at infinity
_INF: Final[_Jacobian] = (1, 1, 0)

_SHA256_DIGEST_INFO: Final = bytes.fromhex("3031300d060960864801650304020105000420")

ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _double(pt: _Jacobian) -> _Jacobian:
    x, y, z = pt
    if z == 0 or y == 0:
        return _INF
    delta = z * z % _P
    gamma = y * y % _P
    beta = x * gamma % _P
    alpha = 3 * (x - delta) * (x + delta) % _P
    x3 = (alpha * alpha - 8 * beta) % _P
    z3 = ((y + z) ** 2 - gamma - delta) % _P
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % _P
    return x3, y3, z3


def _add(p1: _Jacobian, p2: _Jacobian) -> _Jacobian:
    x1, y1, z1 = p1
    x2, y2, z2 = p2
    if z1 == 0:
        return p2
    if z2 == 0:
        return p1
    z1z1 = z1 * z1 % _P
    z2z2 = z2 * z2 % _P
    u1 = x1 * z2z2 % _P
    u2 = x2 * z1z1 % _P
    s1 = y1 * z2 * z2z2 % _P
    s2 = y2 * z1 * z1z1 % _P
    if u1 == u2:
        return _double(p1) if s1 == s2 else _INF
    h = (u2 - u1) % _P
    i = 4 * h * h % _P
    j = h * i % _P
    r = 2 * (s2 - s1) % _P
    v = u1 * i % _P
    x3 = (r * r - j - 2 * v) % _P
    y3 = (r * (v - x3) - 2 * s1 * j) % _P
    z3 = ((z1 + z2) ** 2 - z1z1 - z2z2) * h % _P
    return x3, y3, z3


def _multiply(k: int, pt: _Jacobian) -> _Jacobian:
    # Montgomery ladder: the same sequence of operations for every bit.
    r0, r1 = _INF, pt
    for bit in bin(k)[2:]:
        if bit == "1":
            r0, r1 = _add(r0, r1), _double(r1)
        else:
            r0, r1 = _double(r0), _add(r0, r1)
    return r0


def _affine(pt: _Jacobian) -> tuple[int, int]:
    x, y, z = pt
    if z == 0:
        raise ValueError("point at infinity")
    zinv = pow(z, -1, _P)
    zinv2 = zinv * zinv % _P
    return x * zinv2 % _P, y * zinv2 * zinv % _P


_G: Final[_Jacobian] = (_GX, _GY, 1)


def _rfc6979_nonces(d: int, digest: bytes) -> Iterator[int]:
    """Candidate nonces k for P-256 and SHA-256 (RFC 6979 §3.2), in order."""
    x = d.to_bytes(32, "big")
    h = (int.from_bytes(digest, "big") % _N).to_bytes(32, "big")
    v = b"\x01" * 32
    k = b"\x00" * 32
    k = hmac.new(k, v + b"\x00" + x + h, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    k = hmac.new(k, v + b"\x01" + x + h, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    while True:
        v = hmac.new(k, v, hashlib.sha256).digest()
        candidate = int.from_bytes(v, "big")
        if 1 <= candidate < _N:
            yield candidate
        k = hmac.new(k, v + b"\x00", hashlib.sha256).digest()
        v = hmac.new(k, v, hashlib.sha256).digest()


def es256_sign(key: EcPrivateKey, message: bytes) -> bytes:
    """The JWS ES256 signature: r and s, 32 bytes each (RFC 7518 §3.4)."""
    digest = hashlib.sha256(message).digest()
    e = int.from_bytes(digest, "big")
    d = key.scalar
    for k in _rfc6979_nonces(d, digest):
        r = _affine(_multiply(k, _G))[0] % _N
        if r == 0:
            continue
        s = pow(k, -1, _N) * (e + r * d) % _N
        if s != 0:
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    raise AssertionError("unreachable")


def rs256_sign(key: RsaPrivateKey, message: bytes) -> bytes:
    """RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2)."""
    size = (key.n.bit_length() + 7) // 8
    t = _SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
    em = b"\x00\x01" + b"\xff" * (size - len(t) - 3) + b"\x00" + t
    m = int.from_bytes(em, "big")
    if key.crt is not None:
        p, q, dp, dq, qinv = key.crt
        m1 = pow(m, dp, p)
        m2 = pow(m, dq, q)
        s = m2 + (qinv * (m1 - m2) % p) * q
    else:
        s = pow(m, key.private_exponent, key.n)
    # A faulty signature computed with the CRT can give the key away; never release one.
    if pow(s, key.e, key.n) != m:
        raise OAuthConfigError("the RSA key is inconsistent (its parts do not match)")
    return s.to_bytes(size, "big")


def sign(key: SigningKey, message: bytes) -> bytes:
    if isinstance(key, EcPrivateKey):
        return es256_sign(key, message)
    return rs256_sign(key, message)


def _segment(obj: JsonObject) -> str:
    return b64url(json.dumps(obj, separators=(",", ":"), sort_keys=True).encode())


def encode_jwt(claims: JsonObject, key: SigningKey) -> str:
    header: JsonObject = {"alg": key.alg, "typ": "JWT"}
    if key.kid is not None:
        header["kid"] = key.kid
    signing_input = f"{_segment(header)}.{_segment(claims)}"
    return f"{signing_input}.{b64url(sign(key, signing_input.encode('ascii')))}"


def client_assertion(
    *,
    client_id: str,
    audience: str,
    key: SigningKey,
    now: float,
    random: RandomSource,
    lifetime: int = 120,
) -> str:
    issued = int(now)
    claims: JsonObject = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + lifetime,
        "jti": b64url(random(16)),
    }
    return encode_jwt(claims, key)
