"""Local names for things other than tools (prompts), by the tools' own rules.

The same template, the same character rule and the same hash suffix as the tool
table (``registry.table``), so a prompt and a tool of one server read alike:
``mcp__notes__daily``. The whole set is named at once; it is small (a server has a
handful of prompts) and naming it whole keeps the result independent of the order in
which servers came up. As in the tool table, a hashed name outranks a plain one:
anyone can compute a hashed name, and a server listing another's as a plain name of
its own gets a hashed name for it instead of taking it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config.model import NamingConfig
from .table import candidate_name, hashed_name, most_digits

Key = tuple[str, str]  # (alias, the name agents see before the template)


def assign(naming: NamingConfig, keys: Iterable[Key]) -> dict[Key, str]:
    """A local name for every key: the template's name when it is short enough, nobody
    else wants it and it is no key's hashed name, else that name cut and ended in a
    hash of ``alias::name``."""
    claims: dict[str, list[Key]] = {}
    for key in sorted(set(keys)):
        claims.setdefault(candidate_name(naming.template, *key), []).append(key)
    plain: dict[str, Key] = {}
    to_hash: list[tuple[str, Key]] = []
    for cand, wanted in sorted(claims.items()):
        if len(wanted) == 1 and len(cand) <= naming.max_length:
            plain[cand] = wanted[0]
        else:
            to_hash.extend((cand, key) for key in wanted)
    out: dict[Key, str] = {}
    hashed: set[str] = set()
    most = most_digits(naming.max_length)
    while to_hash:
        for cand, key in to_hash:
            digits = 6
            local = hashed_name(cand, key[0], key[1], naming.max_length, digits)
            while local in hashed and digits < most:
                digits += 2
                local = hashed_name(cand, key[0], key[1], naming.max_length, digits)
            out[key] = local
            hashed.add(local)
        # A plain name that is now a hashed one is hashed in its turn.
        to_hash = [(cand, plain.pop(cand)) for cand in sorted(plain) if cand in hashed]
    for cand, key in plain.items():
        out[key] = cand
    return out
