"""Asking a connected server whether it still answers, and what the answer means.

Two kinds of probe, both a cheap request (``server/discover``, or ``ping`` for a
legacy server: never a list, which a server may take long to make):

- liveness, after a call failed in a way that may mean the server is gone, and now
  and then for an idle HTTP server, which has no process whose exit would show: no
  answer within ``LIVENESS_TIMEOUT`` ends the session (the runner restarts or
  reconnects), so an outage shows before a model tries a tool;
- the half-open probe, when the circuit breaker lets one request through after its
  cooldown and no call came to be that one: an answer closes the circuit on trial (it
  shows the server is there, not that its calls work), no answer in time opens it
  again, and a failure to reach the server ends the session as a liveness probe's
  does, so a server gone away is shown unreachable and is reconnected to on the
  backoff's delays, not the cooldown's.

A modern server that refuses the liveness probe's ``server/discover`` as only a
legacy server would (``era_signs``) has changed eras: the session ends, and the next
greeting learns its era again.

A probe answered 429 or 503 with ``Retry-After`` is a server that is there and asks
not to be asked before then: the session goes on, and its circuit is held open until
then, as a call's answer of the kind holds it.

A call that ran out of time is held in doubt until its server shows whether it is
there: any answer it gives after that (to the liveness probe the call asks for, or to
anything else) means the call was only slow, and one agent's slow tool must not close
the server to every agent, though it is trouble shown until a call succeeds; a server
that answers nothing within ``LIVENESS_TIMEOUT`` is not answering, and the call
counts against the breaker as the failure it then was.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from transports.errors import ServerCancelled, TransportError, Unreachable

from ..circuit.breaker import Breaker
from ..life.backoff import RestartPolicy
from ..life.downtime import server_wait
from ..oauth import AuthFailed
from .era_signs import legacy_refusal
from .upstream import Upstream

LIVENESS_TIMEOUT: Final = 5.0
# What a server that read the probe can answer besides a result: it is there.
_ANSWERED: Final = (rpc.RPCError, ServerCancelled, MalformedReply)


class Doubt(msgspec.Struct, frozen=True):
    """A call that ran out of time: what the breaker is told of it once settled."""

    at: float  # when it ran out: an answer after that is the server answering
    reason: str
    ticket: int
    trial: bool  # the half-open probe's call, whose slot is given back once settled


class Health:
    def __init__(
        self,
        alias: str,
        breaker: Breaker,
        *,
        interval: Callable[[], float],
        probe_timeout: Callable[[], float],
        on_probe: Callable[[], None],
        answered_at: Callable[[], float],
        trouble_shown: Callable[[], float],
        token_work: Callable[[], int] = lambda: 0,
    ) -> None:
        """``interval`` is the periodic check's (0: none); ``on_probe`` is called as a
        half-open probe starts and ends, and as calls in doubt are settled, so the
        state they show is published; ``answered_at`` says when the server last
        answered anything; ``token_work`` grows as a token request starts and as it
        ends (odd while one runs: ``AuthState.token_work``); ``trouble_shown`` is how
        long trouble shows the server degraded (``stable_after``): ``on_probe`` is
        called as that ends too, with nothing else happening then."""
        self.alias = alias
        self._breaker = breaker
        self._interval = interval
        self._probe_timeout = probe_timeout
        self._on_probe = on_probe
        self._suspect = False
        self._suspected = trio.Event()
        self.next_check = math.inf
        self._answered_at = answered_at
        self._token_work = token_work
        self._doubts: deque[Doubt] = deque()  # in the order they ran out of time
        self._doubted = trio.Event()
        self._trouble_shown = trouble_shown
        self._shown_until = -math.inf  # when the trouble last published stopped showing

    @property
    def suspect(self) -> bool:
        """Whether a liveness probe is asked for."""
        return self._suspect

    @suspect.setter
    def suspect(self, value: bool) -> None:
        self._suspect = value
        if value:
            self._suspected.set()

    def schedule(self) -> None:
        every = self._interval()
        self.next_check = (
            trio.current_time() + every * random.uniform(0.9, 1.1) if every > 0 else math.inf
        )

    def next_wake(self, policy: RestartPolicy, now: float) -> float:
        """When a connected server's task must look again: the next periodic check,
        the breaker's next probe, or the moment past failures are forgotten."""
        deadline = self.next_check
        st = self._breaker.status(now)
        if st.state == "open" and st.retry_at is not None:
            deadline = min(deadline, st.retry_at)
        stable_at = policy.stable_at
        if stable_at is not None and (policy.failures or policy.in_crash_loop):
            deadline = min(deadline, stable_at)
        shown = self._trouble_ends(now)
        if shown is not None and shown > now:
            deadline = min(deadline, shown)
        return deadline

    def _trouble_ends(self, now: float) -> float | None:
        """When the trouble shown now (``state.failed_lately``) stops showing."""
        st = self._breaker.status(now)
        times = [at for at in (st.trouble_at, st.trial_since) if at is not None]
        return max(times) + self._trouble_shown() if times else None

    async def tend(self, up: Upstream, now: float) -> None:
        """Whatever probe is due now, and the news that trouble stopped showing.
        Raises TransportError for a server that is gone."""
        shown = self._trouble_ends(now)
        if shown is not None and self._shown_until < shown <= now:
            # The server's state changed (degraded to ready) with nothing happening.
            self._shown_until = shown
            self._on_probe()
        if now >= self.next_check and self._breaker.state == "closed":
            self.schedule()
            # One that answered within the interval is not idle: that answer shows
            # it is there, and a probe would only wait behind its work.
            if now - self._answered_at() >= self._interval():
                self.suspect = True
        # The half-open probe first: it is due at the time refusals said, and its
        # answer is the liveness probe's too.
        if self._breaker.poll(now) == "half_open":
            await self._half_open(up)
        if self.suspect:
            self.suspect = False
            await self._liveness(up)

    async def probe_meanwhile(self, up: Upstream) -> None:
        """A liveness probe as soon as one is asked for, until cancelled: for while the
        server's task waits for a request of its own (a list, each within
        ``list_timeout``), which the probe would otherwise wait behind, far past its
        own deadline. Raises TransportError as ``tend`` does."""
        while True:
            if not self._suspect:
                self._suspected = trio.Event()
                await self._suspected.wait()
                continue
            self._suspect = False
            try:
                await self._liveness(up)
            except trio.Cancelled:
                self._suspect = True  # not judged: ``tend`` probes again
                raise

    def doubt(self, doubt: Doubt) -> None:
        """A call ran out of time: whether that counts waits for what the server
        answers next, and a liveness probe is asked for."""
        self._doubts.append(doubt)
        self._doubted.set()
        self.suspect = True

    def ran_out(self, reason: str) -> None:
        """A request of the server's own task got no answer in time: held in doubt as
        a call that ran out of time is."""
        self.doubt(Doubt(trio.current_time(), reason, self._breaker.ticket, trial=False))

    def settle(self, heard: float, ran_out_by: float = math.inf) -> None:
        """Settle the calls in doubt that ran out of time by ``ran_out_by``, the
        server having last answered at ``heard``: each reached a working server if
        that was at or after its time ran out (a half-open trial among them closes the
        circuit), else is the failure it would have been counted as at once."""
        doubts = self._doubts
        if not doubts or doubts[0].at > ran_out_by:
            return
        breaker = self._breaker
        now = trio.current_time()
        while doubts and doubts[0].at <= ran_out_by:
            d = doubts.popleft()
            if heard >= d.at:
                breaker.record_timeout(now, d.reason)
                breaker.record_heard(now, d.ticket)
            else:
                breaker.record_failure(now, d.reason, d.ticket)
            if d.trial:
                breaker.release_probe(d.ticket)
        # Whether or not the circuit moved, what the server's state shows did.
        self._on_probe()

    async def judge(self) -> None:
        """Settle each call in doubt ``LIVENESS_TIMEOUT`` after it ran out of time,
        by whether the server answered anything since, whatever the session's own
        task is waiting for meanwhile (a request to a server that stopped). Runs for
        the session's life."""
        while True:
            if not self._doubts:
                self._doubted = trio.Event()
                await self._doubted.wait()
                continue
            first = self._doubts[0].at
            await trio.sleep_until(first + LIVENESS_TIMEOUT)
            due = max(first, trio.current_time() - LIVENESS_TIMEOUT)
            self.settle(self._answered_at(), due)

    async def _liveness(self, up: Upstream) -> None:
        # A probe that waited for a token (the server's 401 sends it to the refresh
        # that calls wait for, or it meets one under way) says nothing of the server:
        # a slow authorization server is not a server that stopped answering, so the
        # judgement waits for a probe that went by without one.
        before = self._token_work()
        try:
            with trio.fail_after(LIVENESS_TIMEOUT):
                await up.probe()
        except _ANSWERED as exc:
            # An answer, even an error, is a server that is there; but not the server
            # the session greeted if it now answers as a legacy one.
            changed = self._changed_era(up, exc)
            if changed is not None:
                raise changed from None
        except AuthFailed:
            return  # no token to ask with; the calls say why
        except TransportError as exc:
            wait = server_wait(exc.retry_after)
            if wait is None:
                raise
            # It answered, asking not to be asked before then: there, and held open.
            now = trio.current_time()
            self.settle(now)
            self._breaker.hold_open(now, now + wait, exc.reason)
            self._on_probe()
            return
        except trio.TooSlowError:
            after = self._token_work()
            if after != before or after % 2:
                return
            # The session ends: the calls in doubt are settled as it does.
            raise TransportError(
                f"{self.alias} stopped responding (a probe got no answer in "
                f"{LIVENESS_TIMEOUT:.0f} s)"
            ) from None
        self.settle(trio.current_time())

    async def _half_open(self, up: Upstream) -> None:
        breaker = self._breaker
        bound = self._probe_timeout()
        # Calls refused meanwhile are told the probe's own bound, not a call's.
        adm = breaker.allow(trio.current_time(), expires_in=bound)
        if not (adm.allowed and adm.probe):
            return
        self._on_probe()
        try:
            with trio.fail_after(bound):
                await up.probe()
        except trio.TooSlowError:
            now = trio.current_time()
            breaker.record_failure(now, "probe timed out", adm.ticket)
        except AuthFailed as exc:
            # No token to ask with: tried again after a longer cooldown, the session kept.
            breaker.record_failure(trio.current_time(), exc.reason, adm.ticket)
        except TransportError as exc:
            now = trio.current_time()
            wait = server_wait(exc.retry_after)
            if wait is not None:
                # It answered, asking not to be asked before then: the session goes on.
                breaker.hold_open(now, now + wait, exc.reason, adm.ticket)
            else:
                # Only a server no connection could be made to at all is one whose
                # connection made again answers the probe; one that exited, cut the
                # connection or failed it otherwise is held open until its cooldown ends.
                unreached = isinstance(exc, Unreachable)
                breaker.record_failure(now, exc.reason, adm.ticket, unreached=unreached)
                raise  # the session is over
        except _ANSWERED as exc:
            changed = self._changed_era(up, exc)
            if changed is not None:
                breaker.record_failure(trio.current_time(), changed.reason, adm.ticket)
                raise changed from None
            self._heard(adm.ticket)
        else:
            self._heard(adm.ticket)
        finally:
            breaker.release_probe(adm.ticket)
        self._on_probe()

    def _changed_era(self, up: Upstream, exc: Exception) -> TransportError | None:
        """What ends the session when ``exc``, a modern server's answer to the probe's
        ``server/discover``, is one only a legacy server gives (``era_signs``)."""
        if up.era != "modern" or not isinstance(exc, rpc.RPCError):
            return None
        legacy = legacy_refusal(exc)
        if legacy is None:
            return None
        return TransportError(
            f"{self.alias}: {legacy}, as a server of the legacy era answers; greeting it again"
        )

    def _heard(self, ticket: int) -> None:
        """The half-open probe was answered: the circuit closes on trial, and a
        liveness probe asked for meanwhile has its answer."""
        now = trio.current_time()
        self._breaker.record_heard(now, ticket)
        self._suspect = False
        self.settle(now)
