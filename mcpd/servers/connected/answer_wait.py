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

A list asked for again that the server answers with an error, or with what cannot be
read as that list (``LIST_FAILURES``), is kept as one that went unanswered is, and
the server goes on serving: ``failed`` says so in the journal (once a minute at most
for each list and reason, counting what was not said; a new reason at once) and in
``mcpd status``, with the latest reason and since when it has failed, until the list
is fetched whole again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.pacing.read_budget import HeldBack
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.errors import SERVER_REPLIES

from .handshake import BadPage

logger = logging.getLogger("mcpd.server")

# What a list fetched again may fail with from a server that is up: an error, its own
# cancel, a reply too large or unreadable, or a page that breaks the protocol. None of
# them ends the session. The server answered, so it is there, and the calls in flight
# on it do not hang on its list: a session begun anew would cut them off (their side
# effects unknown) only to ask the same server for the same list. A page that breaks
# the protocol is no different in that: the list it gave before still routes calls,
# and what fetching a broken list cost holds the next fetch back as a whole one's does
# (``tool_list``). Connecting, there is no tool list to keep yet: one that fails is an
# outage (prompts or resources that fail are said as here, and the tools served:
# ``prompt_resource_lists``).
LIST_FAILURES: Final = (*SERVER_REPLIES, BadPage)
# A list that fails is said in the journal at most this often (seconds).
FAILURE_SAID_EVERY: Final = 60.0


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
        self._failing: dict[str, HeldBack] = {}  # by method, in the order they failed
        self._failure_told: set[str] = set()  # failing, and said so in the journal
        self._failure_said: dict[str, float] = {}  # when each was last said
        self._failure_why: dict[str, str] = {}  # and what it said
        self._failures_unsaid: dict[str, int] = {}

    @property
    def late(self) -> HeldBack | None:
        return next(iter(self._late.values()), None)

    @property
    def trouble(self) -> HeldBack | None:
        """What ``mcpd status`` shows: a request unanswered, else a list failing."""
        return self.late or next(iter(self._failing.values()), None)

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
        except LIST_FAILURES:
            self._answered(method)  # a refusal, or what cannot be read, is an answer too
            raise
        self._answered(method)

    def failed(self, method: str, exc: Exception, then: str) -> None:
        """``method`` was answered with ``exc`` (one of ``LIST_FAILURES``); ``then``
        says what becomes of its list."""
        why = (
            f"the error {quote(exc.message)}"
            if isinstance(exc, rpc.RPCError)
            # The others' words begin with the server's name, which the line has.
            else str(exc).removeprefix(f"{self.alias}: ")
        )
        now = trio.current_time()
        was = self._failing.get(method)
        since = now if was is None else was.since
        self._failing[method] = HeldBack(f"{method} failed: {why}; {then}", since)
        unsaid = self._failures_unsaid.get(method, 0) + 1
        # A new reason is said at once: the journal's last word on a list is its latest.
        same = self._failure_why.get(method) == why
        if same and now < self._failure_said.get(method, -math.inf) + FAILURE_SAID_EVERY:
            self._failures_unsaid[method] = unsaid
            return
        self._failure_said[method] = now
        self._failure_why[method] = why
        self._failures_unsaid.pop(method, None)
        self._failure_told.add(method)
        times = f" (failed {unsaid} times since this was last said)" if unsaid > 1 else ""
        logger.warning(
            "%s: %s failed%s: %s; %s",
            self.alias,
            method,
            times,
            why,
            then,
            extra=log_extra(self.alias, "list_failed", why),
        )

    def listed(self, method: str) -> None:
        """``method``'s list was fetched whole (after it ``failed``, or not)."""
        self._failing.pop(method, None)
        if method in self._failure_told:
            self._failure_told.discard(method)
            logger.info(
                "%s: %s succeeded again",
                self.alias,
                method,
                extra=log_extra(self.alias, "list_failed"),
            )

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
        """A new session: what the last left unanswered or failing went with it."""
        self._late.clear()
        self._failing.clear()
        self._failure_told.clear()
        self._failure_why.clear()
