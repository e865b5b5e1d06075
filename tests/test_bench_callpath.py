"""The bench's in-process count of mcpd's own Python per call counts mcpd's code: a
count that missed it (a moved package, a hook that never fired) would read as a call
path that costs nothing."""

from __future__ import annotations

import json

import pytest

from bench import callpath


def test_it_counts_the_functions_and_bytecodes_a_call_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert callpath.main(["--cells", "1:64,4:64", "--calls", "8", "--json"]) == 0
    one, four = json.loads(capsys.readouterr().out)
    for row in (one, four):
        # A call runs the splice's decoder, the scheduler and the writers at least.
        assert 10 < row["functions"] < 500, row
        assert 200 < row["bytecodes"] < 20_000, row
    # Calls that come together share the reader's and writers' work.
    assert four["functions"] < one["functions"]


def test_over_http_it_counts_the_http_transport_too(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--cells", "1:64", "--calls", "8", "--http-server", "--by-function"]
    assert callpath.main(args) == 0
    out = capsys.readouterr().out
    # The HTTP exchange (request headers, h11 events, the answer's reader) is counted
    # as mcpd's own, and costs more than a line over a pipe.
    assert "transports/http/transport.py:request" in out
    assert "transports/stdio/" not in out
    row = out.splitlines()[1].split()
    assert int(row[3]) > 1000, out[:400]
