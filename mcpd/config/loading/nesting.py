"""How deeply a config file may nest its tables, arrays and objects.

No config comes near the bound: a file that nests deeper is refused with that reason
as it is read, before the walks over its values (expansion, the checks, conversion
to the model) could recurse as deep as the interpreter lets them.
"""

from __future__ import annotations

from typing import Final

MAX_NESTING: Final = 100


def too_deep_to_read(source: str) -> str:
    """The error for a file at ``source`` that nests deeper than the bound."""
    return f"{source}: nested more than {MAX_NESTING} levels deep"


def nests_too_deep(node: object) -> bool:
    """Whether ``node`` (dicts and lists, as decoded) nests deeper than the bound;
    walked without recursion."""
    stack: list[tuple[object, int]] = [(node, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_NESTING:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
