from __future__ import annotations

from mcpd.servers.calling.refusals import breaker_refusal, queue_full
from mcpd.servers.circuit.circuit_states import Admission


def test_a_breakers_refusal_is_the_outage_of_its_state_since_and_retry() -> None:
    adm = Admission(False, "open", 3, since=10.0, retry_at=40.0)
    outage = breaker_refusal("notes", adm)
    assert (outage.server, outage.state, outage.reason) == ("notes", "open", "circuit open")
    assert (outage.since, outage.retry_at) == (10.0, 40.0)
    said = Admission(False, "half_open", 4, reason="a probe is out")
    assert breaker_refusal("notes", said).reason == "a probe is out"


def test_a_full_queue_says_how_many_calls_wait() -> None:
    outage = queue_full("notes", 5)
    assert (outage.state, outage.reason) == ("busy", "5 calls already waiting for this server")
