"""A local name several tools want: which of them keeps it, and what the journal is told.

The template can spell one name from two servers' tools: ``gh__prod``'s ``merge_pr``
and ``gh``'s ``prod__merge.pr`` both read ``mcp__gh__prod__merge_pr``. A tool agents
may call (not held: its server approved, its definition as approved) keeps the name
before tools that wait for a person (new, changed, of a server held whole), which get
hashed names: else a server could have an approved tool's name hashed away, and calls
to it fail, by listing a look-alike it has not yet been allowed to serve. When none of
them or more than one may be called, all are hashed, so the names depend on the tools
and on what is approved, never on which server listed first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from protocol.logfields import log_extra

logger = logging.getLogger("mcpd.registry")

Key = tuple[str, str]  # (alias, the tool's name before the template)


def keeper(claims: Sequence[Key], callable_now: Callable[[Key], bool]) -> Key | None:
    """The one of ``claims`` that keeps the name they all want, if one does."""
    able = [key for key in claims if callable_now(key)]
    return able[0] if len(able) == 1 else None


class Told:
    """What the journal was last told of each name several tools want, so that it is
    told again only when who wants it, or what each got, changed."""

    __slots__ = ("_told",)

    def __init__(self) -> None:
        self._told: dict[str, tuple[tuple[Key, str], ...]] = {}

    def tell(self, name: str, claims: Sequence[Key], local_of: Callable[[Key], str]) -> None:
        if len(claims) < 2:
            self._told.pop(name, None)
            return
        now = tuple((key, local_of(key)) for key in sorted(claims))
        if self._told.get(name) == now:
            return
        self._told[name] = now
        kept = [f"{alias}'s {tool!r}" for (alias, tool), local in now if local == name]
        moved = [f"{alias}'s {tool!r} as {local}" for (alias, tool), local in now if local != name]
        how = f"{kept[0]} keeps it (the others wait for approval); " if kept else ""
        logger.warning(
            "%s is the name of more than one tool: %slisted are %s; see `mcpd tools`",
            name,
            how,
            ", ".join(moved),
            extra=log_extra(None, "name_shared"),
        )

    def forget(self) -> None:
        self._told.clear()
