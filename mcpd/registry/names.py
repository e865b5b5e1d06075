"""Local names for things other than tools (prompts), by the tools' own rules.

The same template, the same character rule and the same hash suffix as the tool
table (``registry.table``), so a prompt and a tool of one server read alike:
``mcp__notes__daily``. The whole set is named at once; it is small (a server has a
handful of prompts) and naming it whole keeps the result independent of the order in
which servers came up.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config.model import NamingConfig
from .table import candidate_name, hashed_name

Key = tuple[str, str]  # (alias, the name agents see before the template)


def assign(naming: NamingConfig, keys: Iterable[Key]) -> dict[Key, str]:
    """A local name for every key: the template's name when it is short enough and
    nobody else wants it, else that name cut and ended in a hash of ``alias::name``."""
    claims: dict[str, list[Key]] = {}
    for key in sorted(set(keys)):
        claims.setdefault(candidate_name(naming.template, *key), []).append(key)
    out: dict[Key, str] = {}
    taken: set[str] = set()
    hashed: list[tuple[str, Key]] = []
    for cand, wanted in sorted(claims.items()):
        if len(wanted) == 1 and len(cand) <= naming.max_length:
            out[wanted[0]] = cand
            taken.add(cand)
        else:
            hashed.extend((cand, key) for key in wanted)
    for cand, key in hashed:
        digits = 6
        local = hashed_name(cand, key[0], key[1], naming.max_length, digits)
        # Another key's plain name (or a hash already handed out) is not free.
        while local in taken or local in claims:
            digits += 2
            local = hashed_name(cand, key[0], key[1], naming.max_length, digits)
        out[key] = local
        taken.add(local)
    return out
