"""A local name several tools want: what the journal is told of it.

The template can spell one name from two servers' tools: ``gh__prod``'s ``merge_pr``
and ``gh``'s ``prod__merge.pr`` both read ``mcp__gh__prod__merge_pr``. All of them get
hashed names, whatever is approved: a name that went to whichever may be called now
would pass to a newcomer once the approved tool is held for a change, and calls to it
would reach the other server. The journal names the tools, so the loss of a plain name
is explained; so it does of a tool the template would give the name of one of mcpd's
own tools (``spelling.OWN_TOOLS``), hashed as well, however few want that name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from protocol.shown.logfields import log_extra

from .spelling import OWN_TOOLS

logger = logging.getLogger("mcpd.registry")

SharedKey = tuple[str, str]  # (alias, the tool's name before the template)


class Told:
    """What the journal was last told of each name several tools want, so that it is
    told again only when who wants it, or what each got, changed."""

    __slots__ = ("_told",)

    def __init__(self) -> None:
        self._told: dict[str, tuple[tuple[SharedKey, str], ...]] = {}

    def tell(
        self, name: str, claims: Sequence[SharedKey], local_of: Callable[[SharedKey], str]
    ) -> None:
        own = name in OWN_TOOLS
        if len(claims) < (1 if own else 2):
            self._told.pop(name, None)
            return
        now = tuple((key, local_of(key)) for key in sorted(claims))
        if self._told.get(name) == now:
            return
        self._told[name] = now
        listed = ", ".join(f"{alias}'s {tool!r} as {local}" for (alias, tool), local in now)
        if own:
            logger.warning(
                "%s is the name of mcpd's own tool, which a call by it reaches, so a "
                "server's tool is hashed: listed are %s; see `mcpd tools`",
                name,
                listed,
                extra=log_extra(None, "name_shared"),
            )
            return
        logger.warning(
            "%s is the name of more than one tool, so each is hashed: listed are %s; "
            "see `mcpd tools`",
            name,
            listed,
            extra=log_extra(None, "name_shared"),
        )

    def forget(self) -> None:
        self._told.clear()
