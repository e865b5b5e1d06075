"""Why a call its scheduler admitted never reached its server, in the outage it ends
with: refused by the server's circuit breaker, by a queue already full, or left
waiting in the queue for a slot until its time was up."""

from __future__ import annotations

from ..circuit.circuit_states import Admission
from ..status.outage import Outage
from .calls import CallLimits


def breaker_refusal(alias: str, adm: Admission) -> Outage:
    """What ``adm``, a refusal of the breaker's, says of the server."""
    return Outage(alias, adm.state, adm.reason or "circuit open", adm.since, adm.retry_at)


def queue_full(alias: str, waiting: int) -> Outage:
    return Outage(alias, "busy", f"{waiting} calls already waiting for this server")


def no_slot(alias: str, limits: CallLimits, limit: int) -> Outage:
    """A queued call's, when the server is up but ran ``limit`` calls all the while."""
    waited = limits.queue_timeout
    return Outage(alias, "busy", f"no free slot within {waited:.0f} s ({limit} calls at a time)")
