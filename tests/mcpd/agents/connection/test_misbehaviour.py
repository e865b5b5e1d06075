"""An agent's faults are logged once as they happen and counted when it goes."""

from __future__ import annotations

import logging

import pytest

from mcpd.agents.connection.misbehaviour import Misbehaviour


def test_first_of_each_kind_then_the_totals(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    faults = Misbehaviour()
    for i in range(5):
        faults.invalid_line("agent (pid 7, uid 0)", f"bad {i}")
    faults.refused_at_limit("agent (pid 7, uid 0)", 64)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "agent (pid 7, uid 0) sent a line that is not JSON-RPC (bad 0); answered with an error",
        "agent (pid 7, uid 0) has 64 requests in flight, the limit; refusing more until some end",
    ]
    caplog.clear()
    faults.log_totals("agent (pid 7, uid 0)")
    # One refusal was already logged as it happened: no total for it.
    assert [r.getMessage() for r in caplog.records] == [
        "agent (pid 7, uid 0) sent 5 lines in all that were not JSON-RPC"
    ]
