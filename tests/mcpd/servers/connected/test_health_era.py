"""A probe's ``server/discover`` refused as only a legacy server refuses it: the
server has changed eras under the session, which ends so the next greeting learns its
era again, rather than the refusal counting as a server that is there."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from tests.support.parts.health_setup import Setup
from transports.errors import HttpRPCError, TransportError

NO_SESSION = HttpRPCError(-32000, "Bad Request: No valid session ID provided", http_status=400)


@pytest.mark.parametrize("half_open", [True, False], ids=["half-open probe", "liveness probe"])
@pytest.mark.parametrize(
    "answer",
    [NO_SESSION, rpc.RPCError(rpc.METHOD_NOT_FOUND, "Method not found")],
    ids=["no session", "method unknown"],
)
async def test_a_probe_refused_as_a_legacy_server_refuses_it_ends_the_session(
    autojump_clock: trio.testing.MockClock, half_open: bool, answer: rpc.RPCError
) -> None:
    s = Setup()
    if half_open:
        s.open_breaker()
        await trio.sleep(10)
    else:
        s.health.suspect = True
    s.server.answer = answer
    with pytest.raises(TransportError, match="as a server of the legacy era answers"):
        await s.tend()
    # Not taken for an answer: the circuit does not close on it.
    assert s.breaker.state == ("open" if half_open else "closed")


async def test_a_legacy_sessions_probe_refused_so_is_an_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s = Setup()
    s.server.era = "legacy"
    s.server.answer = rpc.RPCError(rpc.METHOD_NOT_FOUND, "Method not found")
    s.health.suspect = True
    await s.tend()
    assert (s.server.probes, s.health.suspect) == (1, False)
