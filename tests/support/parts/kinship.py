"""One decider judged against agents once, as the daemon judges many with one
``Kinship``."""

from __future__ import annotations

from collections.abc import Iterable

from mcpd.policy.deciders.kin import AgentKin, Decider, Tie
from mcpd.policy.deciders.kinship import Kinship


def agent_tie(decider: Decider, agents: Iterable[AgentKin]) -> tuple[Tie, int | None] | None:
    """How ``decider`` is kin to the first of ``agents`` it is kin to; None: to none."""
    return Kinship(agents).tie(decider)
