"""An RSA key's parts, and the key files written of them as they are, matching or not:
for tests of what mcpd makes of a key file whose parts do not belong together."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives.asymmetric import rsa

PRIVATE = rsa.generate_private_key(65537, 2048)
NUMBERS = PRIVATE.private_numbers()
PARTS = {
    "n": NUMBERS.public_numbers.n,
    "e": NUMBERS.public_numbers.e,
    "d": NUMBERS.d,
    "p": NUMBERS.p,
    "q": NUMBERS.q,
    "dp": NUMBERS.dmp1,
    "dq": NUMBERS.dmq1,
    "qi": NUMBERS.iqmp,
}


def _der_int(value: int) -> bytes:
    body = value.to_bytes(value.bit_length() // 8 + 1, "big")
    return b"\x02" + _der_length(len(body)) + body


def _der_length(size: int) -> bytes:
    if size < 0x80:
        return bytes([size])
    raw = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def pkcs1_pem(parts: dict[str, int]) -> str:
    """An ``RSA PRIVATE KEY`` of ``parts`` as they are, matching or not."""
    names = ("n", "e", "d", "p", "q", "dp", "dq", "qi")
    body = _der_int(0) + b"".join(_der_int(parts[k]) for k in names)
    der = b"\x30" + _der_length(len(body)) + body
    lines = "\n".join(base64.b64encode(der).decode()[i : i + 64] for i in range(0, 3000, 64))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{lines.strip()}\n-----END RSA PRIVATE KEY-----\n"


def jwk(parts: dict[str, int]) -> str:
    def b64(n: int) -> str:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return json.dumps({"kty": "RSA", **{k: b64(v) for k, v in parts.items()}})
