"""Well-known credential formats, masked in what a server sends when
``redact_patterns`` is on: they may be anyone's, so the marker names the kind.

``TRIGGER`` is what the raw bytes are searched for first (cheap, and loose: a JSON
string holds a key block's line breaks escaped); only text it finds something in is
searched with the full patterns.
"""

from __future__ import annotations

import re
from typing import Final

# (kind, pattern): each written for the format's fixed prefix and its alphabet.
_KINDS: Final = (
    (
        "private key",
        # To its END line, or to the end of the text when that is cut off.
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*)",
    ),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("Slack token", r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),
    ("API key", r"\bsk-[A-Za-z0-9_-]{20,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
)

_ALL: Final = re.compile("|".join(f"(?P<k{i}>{p})" for i, (_, p) in enumerate(_KINDS)), re.S)

TRIGGER: Final = re.compile(
    rb"PRIVATE KEY-----|github_pat_"
    # A word's edge in the text may be an escape in the bytes: a line break ("\n") or
    # a character written as \uXXXX (a curly quote, a dash) ends in a letter or digit.
    rb"|(?:\b|\\[bfnrt]|\\u[0-9A-Fa-f]{4})"
    rb"(?:(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_|xox[abpr]-|sk-|AIza)"
)


# How the kind of a credential found by its format is counted, apart from the owners
# of the secrets mcpd holds ("servers.NAME.env.KEY").
FORMAT: Final = "format: "


def kind_marker(kind: str) -> str:
    return f"[secret: {kind}]"


def redact(text: str, seen: list[str]) -> str:
    """``text`` with every credential of a known format replaced by its kind's marker;
    ``seen`` gets one entry for each."""

    def replace(m: re.Match[str]) -> str:
        assert m.lastgroup is not None
        kind = _KINDS[int(m.lastgroup[1:])][0]
        seen.append(FORMAT + kind)
        return kind_marker(kind)

    return _ALL.sub(replace, text)
