"""``AgentKey``: the key both the agent side and the servers keep what an agent leaves at
mcpd under. A module of its own, as both the servers' ``Call`` and the asks its server
makes of its agent (``asking``) need it, and ``calls`` imports those."""

from __future__ import annotations

from typing import Final


class AgentKey:
    """Who an agent is to what it leaves at mcpd between its requests (its calls waiting
    at a server, its tasks, what its servers asked it, its subscriptions and log level):
    its connection on the socket, its legacy HTTP session, or a stateless client's one
    of its own. Compared by identity: two are one owner only if they are one object, so
    nothing another agent sends can name it."""

    __slots__ = ()


# What a call is kept under when whoever made it named no owner: all such calls are one
# owner's.
NOBODY: Final = AgentKey()
