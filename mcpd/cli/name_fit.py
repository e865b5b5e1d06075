"""``mcpd tools --check-names``: whether the tools' names fit a host's limit on a
tool's name once it adds its own prefix, and the setting that makes mcpd shorten
those that do not."""

from __future__ import annotations

import json

from .exits import EXIT_TOOL_ERROR


def names_fit_json(names: list[str], limit: int, prefix: str) -> int:
    """``--check-names`` with ``--json``: the names that do not fit, and their lengths."""
    from ..agents.lists.formats import too_long

    long = too_long(names, limit, prefix)
    room = limit - len(prefix)
    report = {
        "limit": limit,
        "host_prefix": prefix,
        "tools": len(names),
        "too_long": [{"name": name, "length": len(prefix) + len(name)} for name in long],
        # The [naming] max_length that makes mcpd shorten them (None: none is too long,
        # or the prefix leaves too little room).
        "max_length": room if long and room >= 16 else None,
    }
    print(json.dumps(report, indent=2))
    return EXIT_TOOL_ERROR if long else 0


def names_fit(names: list[str], limit: int, prefix: str) -> int:
    from ..agents.lists.formats import too_long

    long = too_long(names, limit, prefix)
    with_prefix = f" after the host's prefix {prefix!r} ({len(prefix)})" if prefix else ""
    if not long:
        print(f"all {len(names)} tool names fit {limit} characters{with_prefix}")
        return 0
    print(f"{len(long)} of {len(names)} tool names do not fit {limit} characters{with_prefix}:")
    for name in long:
        print(f"  {name}  ({len(prefix) + len(name)})")
    room = limit - len(prefix)
    if room >= 16:
        print(
            f"[naming] max_length = {room} makes mcpd shorten them (a short hash keeps "
            "each unique and stable)"
        )
    else:
        shorter = "a shorter host prefix" if prefix else "a host that takes longer names"
        print(f"only {room} of {limit} characters are left for mcpd's names: {shorter} is needed")
    return EXIT_TOOL_ERROR
