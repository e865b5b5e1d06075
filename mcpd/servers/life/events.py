"""The journal lines of one server's life, worded in one place.

One line per transition while a server is down (and a reminder every few minutes
while it stays down), one when it is ready or recovers, one per move of its circuit
breaker. Each carries the server, the event and the reason as journal fields, and the
server's last stderr lines when it went down. Records name the runner's code as
their source (``stacklevel``): that is where the event happened.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.errors import SpawnError, TransportError

from ..circuit.circuit_states import Transition
from ..status.outage import clock_time
from .backoff import BackoffConfig, Restart

logger = logging.getLogger("mcpd.server")

REMINDER_EVERY: Final = 300.0
_KINDS: Final = {"http": "Streamable HTTP", "sse": "the old HTTP+SSE transport (2024-11-05)"}
# Events whose journal entry carries the server's last stderr lines.
_WITH_STDERR: Final = frozenset({"outage", "crash_loop", "spawn_failed"})


class LifecycleJournal:
    def __init__(self, alias: str, stderr: Callable[[], list[str]]) -> None:
        self.alias = alias
        self._stderr = stderr
        self._last = -math.inf

    def event(
        self, level: int, event: str, message: str, reason: str | None = None, *, depth: int = 1
    ) -> None:
        self._last = trio.current_time()
        stderr = self._stderr() if event in _WITH_STDERR else None
        logger.log(
            level,
            "%s",
            message,
            extra=log_extra(self.alias, event, reason, stderr),
            stacklevel=depth + 2,
        )

    def breaker(self, t: Transition) -> None:
        if t.settled:
            return  # no outage ended, nothing to say: only what status shows changes
        if t.old == t.new == "open":
            self.event(
                logging.WARNING,
                "breaker_open",
                f"circuit kept open as the server asked to wait ({t.reason}); "
                f"next probe at {clock_time(t.retry_at)}",
                t.reason,
                depth=2,
            )
        elif t.new == "open":
            self.event(
                logging.WARNING,
                "breaker_open",
                f"circuit open after failures ({t.reason}); next probe at {clock_time(t.retry_at)}",
                t.reason,
                depth=2,
            )
        elif t.new == "half_open":
            self.event(logging.INFO, "breaker_half_open", "circuit half-open, probing", depth=2)
        elif t.asked:
            self.event(
                logging.INFO,
                "breaker_trial",
                "circuit closed on trial as asked: its next call decides",
                depth=2,
            )
        elif t.trial:
            self.event(
                logging.INFO,
                "breaker_trial",
                "circuit closed on trial: the server answers, and its next call decides",
                depth=2,
            )
        elif t.new == "closed":
            self.event(logging.INFO, "recovered", "circuit closed, server answering again", depth=2)

    def failed(
        self,
        event: str,
        detail: str,
        reason: str,
        *,
        retry_at: float,
        restart: Restart,
        policy: BackoffConfig,
        first: bool,
        changed: bool,
        process: bool = True,
    ) -> None:
        """An attempt to start or connect failed (``first``: the server was up before;
        ``process``: it is a child process, which can be in a crash loop)."""
        if not process and restart.failures == policy.max_restarts:
            self.event(
                logging.WARNING,
                "outage",
                f"still unavailable after {restart.failures} attempts: {reason}; "
                f"retrying with delays growing to {policy.cap:.0f} s, "
                f"next at {clock_time(retry_at)}",
                reason,
                depth=2,
            )
        elif restart.entered_crash_loop and event == "spawn_failed":
            # Never started, so not a crash loop, though it is retried as slowly as one.
            self.event(
                logging.ERROR,
                "spawn_failed",
                f"still cannot start after {restart.failures} attempts within "
                f"{policy.window:.0f} s: {reason}; retrying every {policy.cap:.0f} s",
                reason,
                depth=2,
            )
        elif restart.entered_crash_loop:
            self.event(
                logging.ERROR,
                "crash_loop",
                f"crash loop: {restart.failures} failures within {policy.window:.0f} s; "
                f"retrying every {policy.cap:.0f} s. Last error: {reason}",
                reason,
                depth=2,
            )
        elif first or changed or trio.current_time() - self._last >= REMINDER_EVERY:
            still = "" if first else "still "
            # The journal and the log line name the server already.
            detail = detail.splitlines()[0].removeprefix(f"{self.alias}: ")
            self.event(
                logging.ERROR if event == "spawn_failed" else logging.WARNING,
                event,
                f"{still}unavailable: {detail}; retrying at {clock_time(retry_at)}",
                reason,
                depth=2,
            )
        else:
            logger.debug("%s: attempt failed again: %s", self.alias, reason)

    def connected(self, was_down: bool, how: str, tools: int, held: float | None = None) -> None:
        """``held``: when the probe of a circuit still open is due (None: it is closed)."""
        if held is not None:
            # Started or connected again, but its calls failed: not a recovery.
            self.event(
                logging.INFO,
                "reconnected",
                f"{how}, {tools} tools; its circuit stays open, "
                f"until a probe at {clock_time(held)} decides",
            )
        elif was_down:
            self.event(logging.INFO, "recovered", f"available again ({tools} tools)")
        else:
            self.event(logging.INFO, "ready", f"{how}, {tools} tools")

    def switched(self, old: str, new: str) -> None:
        """The server turned out to speak the other HTTP transport."""
        self.event(
            logging.INFO,
            "transport",
            f"speaks {_KINDS[new]}, not {_KINDS[old]}; using that",
        )

    def restarting(self, what: str, failures: int) -> None:
        if failures <= 1:
            self.event(logging.INFO, "restart", what, depth=2)
        else:
            logger.debug("%s: %s (attempt %d)", self.alias, what, failures + 1)


class Failure(msgspec.Struct, frozen=True):
    """An attempt's failure, as the journal and ``mcpd status`` name it."""

    event: str  # spawn_failed | outage | internal
    detail: str  # for the log line (its first line), with more after a newline
    reason: str  # one line for people and models
    retry_after: float | None = None

    @property
    def log_event(self) -> str:
        return "outage" if self.event == "internal" else self.event


def describe_failure(exc: Exception, alias: str) -> Failure | None:
    """What went wrong in an attempt to start or connect; None for what is not an
    attempt's failure (and must go on up)."""
    if isinstance(exc, SpawnError):
        return Failure("spawn_failed", exc.describe(), exc.reason)
    if isinstance(exc, MessageTooLarge | MalformedReply):
        return Failure("outage", exc.reason, exc.reason)
    if isinstance(exc, TransportError):
        return Failure("outage", exc.describe(), exc.reason, exc.retry_after)
    if isinstance(exc, rpc.RPCError):
        said = f"protocol error: {quote(exc.message)}"
        return Failure("outage", said, said)
    if isinstance(exc, trio.TooSlowError):
        text = "did not answer in time while connecting"
        return Failure("outage", text, text)
    return Failure("internal", f"internal error: {exc!r}", f"internal error: {exc!r}")
