"""Local names for things other than tools (prompts), by the tools' own rules.

The same template, the same character rule and the same hash suffix as the tool
table (``registry.tables.table``), so a prompt and a tool of one server read alike:
``mcp__notes__daily``. The whole set is named at once; it is small (a server has a
handful of prompts) and naming it whole keeps the result independent of the order in
which servers came up. As in the tool table, a name shaped like a hashed one is hashed
too, as is one of mcpd's own tools' names, and hashed names that agree are all
lengthened, so no plain name is ever a hashed
one and no prompt takes another's name by listing it; all that want one name are
hashed, whatever is approved, so a newcomer never takes an approved item's name.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...config.tables.model import NamingConfig
from .spelling import candidate_name, fits_as_is, hashed_name, most_digits

NameKey = tuple[str, str]  # (alias, the name agents see before the template)


def assign(naming: NamingConfig, keys: Iterable[NameKey]) -> dict[NameKey, str]:
    """A local name for every key: the template's name when it is short enough, nobody
    else wants it and it reads neither as a hashed name nor as one of mcpd's own
    tools (``spelling.fits_as_is``), else that name cut and ended
    in a hash of ``alias::name``, as many digits as it takes to be no other's."""
    claims: dict[str, list[NameKey]] = {}
    for key in sorted(set(keys)):
        claims.setdefault(candidate_name(naming.template, *key), []).append(key)
    out: dict[NameKey, str] = {}
    to_hash: list[tuple[str, NameKey]] = []
    for cand, wanted in claims.items():
        if len(wanted) == 1 and fits_as_is(cand, naming.max_length):
            out[wanted[0]] = cand
        else:
            to_hash.extend((cand, key) for key in wanted)
    digits, most = 6, most_digits(naming.max_length)
    while to_hash:
        # Names of different lengths never agree: each length is settled on its own.
        at: dict[str, list[tuple[str, NameKey]]] = {}
        for cand, key in to_hash:
            at.setdefault(hashed_name(cand, *key, naming.max_length, digits), []).append(
                (cand, key)
            )
        to_hash = []
        for local, agreeing in at.items():
            if len(agreeing) == 1 or digits >= most:
                out.update((key, local) for _, key in agreeing)
            else:
                to_hash.extend(agreeing)
        digits += 2
    return out
