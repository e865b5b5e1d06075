"""What an agent connection did wrong, for the log: the first of each kind is logged as
it happens, naming the agent, and a count of the rest when the agent goes.

Garbage or a flood of requests must not flood the log, but which agent sent them must
be in it.
"""

from __future__ import annotations

import logging

from protocol.shown.logfields import log_extra

logger = logging.getLogger("mcpd.agents")


class Misbehaviour:
    __slots__ = ("invalid", "over_limit")

    def __init__(self) -> None:
        self.invalid = 0  # lines that were not JSON-RPC
        self.over_limit = 0  # requests refused at the in-flight limit

    def invalid_line(self, label: str, why: str) -> None:
        self.invalid += 1
        if self.invalid == 1:
            logger.warning(
                "%s sent a line that is not JSON-RPC (%s); answered with an error",
                label,
                why,
                extra=log_extra(None, reason="invalid input"),
            )

    def refused_at_limit(self, label: str, limit: int) -> None:
        self.over_limit += 1
        if self.over_limit == 1:
            logger.warning(
                "%s has %d requests in flight, the limit; refusing more until some end",
                label,
                limit,
                extra=log_extra(None, reason="too many requests in flight"),
            )

    def log_totals(self, label: str) -> None:
        """When the agent goes: how many of each there were, if more than the first."""
        if self.invalid > 1:
            logger.warning(
                "%s sent %d lines in all that were not JSON-RPC",
                label,
                self.invalid,
                extra=log_extra(None, reason="invalid input"),
            )
        if self.over_limit > 1:
            logger.warning(
                "%s had %d requests in all refused at the in-flight limit",
                label,
                self.over_limit,
                extra=log_extra(None, reason="too many requests in flight"),
            )
