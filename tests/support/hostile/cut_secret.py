"""A secret a server pads so that one of mcpd's cuts of its words falls inside it, and
what of the secret's beginning a text shows once the secret guard has passed over it."""

from __future__ import annotations

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.cutparts import CUT_PART
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets

SECRET = "sk9Qv7TzLpX3wR8mKd2NfYb6HcJ4sEa1"
WHOSE = "servers.leaky.env.API_KEY"
MARKER = f"[secret of {WHOSE}]"


def padded(kept: int, after: int = 60) -> str:
    """Text whose first ``kept`` characters end with all of ``SECRET`` but its last."""
    return "x" * (kept - len(SECRET) + 1) + SECRET + "z" * after


def beginnings(text: str) -> list[str]:
    """The beginnings of ``SECRET`` (``CUT_PART`` characters or more) ``text`` shows."""
    return [SECRET[:n] for n in range(CUT_PART, len(SECRET) + 1) if SECRET[:n] in text]


def guard() -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(WHOSE, SECRET)])
    return SecretGuard(known)


def guarded(text: str) -> str:
    """``text`` as the guard passes it on to a log line or a status view."""
    g = guard()
    masked = g.text("leaky", text, "a test")
    assert g.shown({"text": text}) == {"text": masked}
    return masked
