"""Whether an imported ``env`` value, header or OAuth client secret is a secret.

It is judged on what the host file itself holds: references are not secrets (their
values come from elsewhere) and an auth scheme word is none either. What is left
counts by the rules mcpd judges arguments and URLs with (``exposure``), or, whatever
its name, by looking like an API key or token.
"""

from __future__ import annotations

import re
from typing import Final

from ..credentials import exposure

SCHEME: Final = re.compile(r"^(Bearer|Basic|Token)\b\s*", re.I)
# Letters and digits, long, no spaces or slashes: an API key or token, whatever its name.
_TOKEN_LIKE: Final = re.compile(r"(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-+=.]{24,}")
_REF_OR_ESCAPE: Final = re.compile(r"\$\$|\$\{[^}]*\}")


def looks_secret(key: str, value: str) -> bool:
    """Whether ``value`` (in mcpd's syntax), given to ``key``, holds a secret."""
    literal = SCHEME.sub("", _REF_OR_ESCAPE.sub(_literal, value).strip()).strip()
    if not literal:
        return False
    return exposure.secret_setting(key, literal) or _TOKEN_LIKE.fullmatch(literal) is not None


def _literal(m: re.Match[str]) -> str:
    return "$" if m.group(0) == "$$" else ""
