"""Checks an ES256 signature the way an authorization server would, with the
``cryptography`` package: mcpd only signs, so the verifier is the tests' own and
independent of the signer it judges."""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

from protocol.oauth.keys import EcPrivateKey


def es256_verifies(key: EcPrivateKey, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` (r and s, 32 bytes each) is ``key``'s signature of ``message``."""
    if len(signature) != 64:
        return False
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    public = ec.derive_private_key(key.scalar, ec.SECP256R1()).public_key()
    try:
        public.verify(utils.encode_dss_signature(r, s), message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
