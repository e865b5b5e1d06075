"""How a local name is spelled: the template filled in, in the characters agents may use,
and where it must be, cut and ended in a hash of whose it is.

Local names come from the configured alias and the template, never from the server's
own name for itself. Characters outside ``[A-Za-z0-9_-]`` become ``_``. A hashed name
ends in ``_`` and the first digits of a SHA-1 of ``alias::name``: six, or more where
hashes agree (``registry.tables.table`` and ``registry.naming.names`` decide how many).

The names of mcpd's own tools (``OWN_TOOLS``: the search mode's meta-tools, in
``agents.lists.metatools``) are never a server's: a call by one reaches mcpd's tool, in
every profile whose discovery is not "all", so a server's tool the template would
give one gets a hashed name, in every profile, as two tools wanting one name do.
"""

from __future__ import annotations

import hashlib
from typing import Final

from .facing import sanitize

# A SHA-1 digest has no more digits than this; a longer hash could never differ.
_MAX_DIGITS: Final = 40
_HEX: Final = frozenset("0123456789abcdef")

SEARCH_TOOL: Final = "mcpd_search_tools"
DESCRIBE_TOOL: Final = "mcpd_describe_tools"
CALL_TOOL: Final = "mcpd_call_tool"
OWN_TOOLS: Final = frozenset((SEARCH_TOOL, DESCRIBE_TOOL, CALL_TOOL))


def most_digits(max_length: int) -> int:
    """The longest hash a name may end in, leaving a character of its own before it."""
    return min(_MAX_DIGITS, max_length - 2)


def candidate_name(template: str, alias: str, tool: str) -> str:
    # Aliases cannot contain braces, so substituting the alias first is unambiguous.
    return sanitize(template.replace("{alias}", alias).replace("{tool}", tool))


def fits_as_is(candidate: str, max_length: int) -> bool:
    """Whether the template's name may be a local name as it is, when no other tool
    wants it: short enough, not read as a hashed name and not one of mcpd's own, nor
    one that reads as it (``MCPD_Call_Tool``, ``mcpd-call-tool``)."""
    return (
        len(candidate) <= max_length
        and not hash_shaped(candidate)
        and candidate.lower().replace("-", "_") not in OWN_TOOLS
    )


def hashed_name(candidate: str, alias: str, tool: str, max_length: int, digits: int = 6) -> str:
    digest = hashlib.sha1(f"{alias}::{tool}".encode()).hexdigest()[:digits]
    return f"{candidate[: max_length - digits - 1]}_{digest}"


def hash_shaped(name: str) -> bool:
    """Whether the name ends as ``hashed_name`` ends its names."""
    cut = name.rfind("_")
    tail = name[cut + 1 :]
    return cut >= 0 and len(tail) >= 6 and all(c in _HEX for c in tail)


def digits_of(hashed: str) -> int:
    """How many digits the hash ``hashed_name`` ended ``hashed`` in."""
    return len(hashed) - hashed.rfind("_") - 1


def alias_prefix(template: str, alias: str) -> str:
    return sanitize(template.split("{tool}", 1)[0].replace("{alias}", alias))
