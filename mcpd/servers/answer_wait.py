"""How long a connected server's own task waits for the server's answers.

Besides its probes, that task asks the server for its lists again, for the resource
subscriptions agents hold and for the level of its log messages. Each of those
requests waits for its answer at most the daemon's ``list_timeout``: a server that
answers calls and probes but leaves one of them unanswered would otherwise hold the
task for good, and with it every later fetch and every probe of the server.

A request that runs out of time is cancelled at the server as any other cancelled
request is; the caller keeps what the server answered before, and asks again when it
next has reason to. That a request got no answer is said once while it goes
unanswered (``mcpd status`` shows it under the server until the server answers it
again); the server's task then has the server probed, as after a call that ran out of
time (``health``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio

from protocol import jsonrpc as rpc
from protocol.logfields import log_extra
from protocol.pacing import HeldBack

logger = logging.getLogger("mcpd.server")


class RanOut(Exception):
    """A request of the server's own task got no answer in time."""

    def __init__(self, method: str, timeout: float) -> None:
        self.method = method
        self.timeout = timeout
        super().__init__(f"{method} got no answer within {timeout:g} s (the daemon's list_timeout)")


class AnswerWait:
    """``timeout`` is read as each request is sent (a reloaded config applies to the
    next one); ``late`` is what ``mcpd status`` shows while a request goes unanswered."""

    def __init__(self, alias: str, timeout: Callable[[], float] = lambda: math.inf) -> None:
        self.alias = alias
        self._timeout = timeout
        self._late: dict[str, HeldBack] = {}  # by method, in the order they ran out

    @property
    def late(self) -> HeldBack | None:
        return next(iter(self._late.values()), None)

    @contextmanager
    def bounded(self, method: str, then: str) -> Iterator[None]:
        """Wait for ``method``'s answers within the timeout, else raise ``RanOut``;
        ``then`` says what becomes of the request when it runs out of time."""
        timeout = self._timeout()
        try:
            with trio.fail_after(timeout):
                yield
        except trio.TooSlowError:
            self._ran_out(method, timeout, then)
            raise RanOut(method, timeout) from None
        except rpc.RPCError:
            self._answered(method)  # a refusal is an answer too
            raise
        self._answered(method)

    def _ran_out(self, method: str, timeout: float, then: str) -> None:
        if method in self._late:
            return  # said when it first ran out: each retry would say it again
        reason = str(RanOut(method, timeout))
        self._late[method] = HeldBack(f"{reason}; {then}", trio.current_time())
        logger.warning(
            "%s: %s: %s",
            self.alias,
            reason,
            then,
            extra=log_extra(self.alias, "unanswered", reason),
        )

    def _answered(self, method: str) -> None:
        if self._late.pop(method, None) is not None:
            logger.info(
                "%s: %s answered again",
                self.alias,
                method,
                extra=log_extra(self.alias, "unanswered"),
            )

    def reset(self) -> None:
        """A new session: what the last left unanswered went with it."""
        self._late.clear()
