"""Asking a connected server whether it still answers, and what the answer means.

Two kinds of probe, both a cheap request (``server/discover`` or ``tools/list``):

- liveness, after a call failed in a way that may mean the server is gone, and now
  and then for an HTTP server, which has no process whose exit would show: no answer
  within ``LIVENESS_TIMEOUT`` ends the session (the runner restarts or reconnects),
  so an outage shows before a model tries a tool;
- the half-open probe, when the circuit breaker lets one request through after its
  cooldown: its outcome closes the circuit or opens it again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Final

import trio

from protocol import jsonrpc as rpc
from transports.errors import MalformedReply, ServerCancelled, TransportError

from .backoff import RestartPolicy
from .breaker import Breaker
from .upstream import Upstream

LIVENESS_TIMEOUT: Final = 5.0
# What a server that read the probe can answer besides a result: it is there.
_ANSWERED: Final = (rpc.RPCError, ServerCancelled, MalformedReply)


class Health:
    def __init__(
        self,
        alias: str,
        breaker: Breaker,
        *,
        interval: Callable[[], float],
        probe_timeout: Callable[[], float],
        on_probe: Callable[[], None],
    ) -> None:
        """``interval`` is the periodic check's (0: none); ``on_probe`` is called as a
        half-open probe starts and ends, so the state it shows is published."""
        self.alias = alias
        self._breaker = breaker
        self._interval = interval
        self._probe_timeout = probe_timeout
        self._on_probe = on_probe
        self.suspect = False
        self.next_check = math.inf

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
        return deadline

    async def tend(self, up: Upstream, now: float) -> None:
        """Whatever probe is due now. Raises TransportError for a server that is gone."""
        if now >= self.next_check and self._breaker.state == "closed":
            self.suspect = True
            self.schedule()
        if self.suspect:
            self.suspect = False
            await self._liveness(up)
        if self._breaker.poll(now) == "half_open":
            await self._half_open(up)

    async def _liveness(self, up: Upstream) -> None:
        try:
            with trio.fail_after(LIVENESS_TIMEOUT):
                await up.probe()
        except _ANSWERED:
            return  # an answer, even an error, is a server that is there
        except trio.TooSlowError:
            raise TransportError(
                f"{self.alias} stopped responding (a probe got no answer in "
                f"{LIVENESS_TIMEOUT:.0f} s)"
            ) from None

    async def _half_open(self, up: Upstream) -> None:
        breaker = self._breaker
        adm = breaker.allow(trio.current_time())
        if not (adm.allowed and adm.probe):
            return
        self._on_probe()
        try:
            with trio.fail_after(self._probe_timeout()):
                await up.probe()
        except (TransportError, trio.TooSlowError) as exc:
            reason = exc.reason if isinstance(exc, TransportError) else "probe timed out"
            breaker.record_failure(trio.current_time(), reason, adm.ticket)
        except _ANSWERED:
            breaker.record_success(trio.current_time(), adm.ticket)
        else:
            breaker.record_success(trio.current_time(), adm.ticket)
        finally:
            breaker.release_probe(adm.ticket)
        self._on_probe()
