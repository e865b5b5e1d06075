"""Upstream: one supervised runner per configured server, its call scheduler, list
keeper and upstream session, the circuit breaker, restart backoff, outages and
latency statistics. Nothing here knows about agents."""
