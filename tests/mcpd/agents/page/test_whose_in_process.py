"""Whose connection a page's session or a one-time code is honoured on (``holder``):
the local user's, on a connection no process of mcpd's servers holds. Refused, as a
page or as JSON for an action, where who holds it cannot be told or a server's
process does, with the reason and a few warnings."""

from __future__ import annotations

import json
import logging

import pytest

from mcpd.agents.entry.holders import HolderLookup, ServerRefusals
from mcpd.agents.entry.identity import Holder
from mcpd.agents.http.exchange import RequestSender
from mcpd.agents.http.wire import Reject
from mcpd.agents.page.whose import connection_holder
from mcpd.local.ownership.tcp_holder import HolderUnknown, ServerNotRuledOut


def owned_by(found: Holder | HolderUnknown) -> RequestSender:
    async def look() -> Holder:
        if isinstance(found, HolderUnknown):
            raise found
        return found

    return RequestSender(peer=None, holder=HolderLookup(look))


async def refused(
    caller: RequestSender, acting: bool, refusals: ServerRefusals | None = None
) -> Reject:
    with pytest.raises(Reject) as info:
        await connection_holder(caller, acting, refusals or ServerRefusals(), "a page's session")
    assert info.value.status == 403
    return info.value


async def test_a_local_users_connection_is_honoured() -> None:
    person = Holder(uid=1000, pid=4321)
    assert await connection_holder(owned_by(person), False, ServerRefusals(), "a code") == person


async def test_a_connection_no_one_said_who_holds_is_refused() -> None:
    reject = await refused(RequestSender(peer=None), acting=True)
    assert json.loads(reject.body) == {
        "error": "a page's session is taken only from the local user who opened it, and "
        "mcpd cannot tell which user holds this connection: mcpd was not told who is at "
        "its other end"
    }


async def test_holders_that_cannot_be_told_from_a_servers_are_refused_as_a_page() -> None:
    reject = await refused(owned_by(ServerNotRuledOut("no process holds it <now>")), acting=False)
    page = reject.body.decode()
    assert "mcpd cannot tell who is connecting" in page
    assert (
        "A page&#x27;s session is never taken on a connection of one of mcpd&#x27;s servers, "
        "and mcpd cannot tell this one from theirs: no process holds it &lt;now&gt;." in page
    )
    assert "<now>" not in page


async def test_a_servers_process_is_refused_and_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Holder(uid=1000, server="notes", pid=77)
    with caplog.at_level(logging.WARNING):
        reject = await refused(owned_by(server), acting=True)
    assert json.loads(reject.body) == {
        "error": "this connection is held by a process of the server 'notes' (pid 77), which "
        "mcpd runs: nothing on mcpd's HTTP endpoint is granted to one of its servers' processes"
    }
    assert len(caplog.messages) == 1
    assert "brought a page's session to mcpd's HTTP endpoint and was refused" in caplog.messages[0]


async def test_a_servers_loopback_relay_is_refused_as_a_page() -> None:
    reject = await refused(owned_by(Holder(uid=1000, server="web")), acting=False)
    page = reject.body.decode()
    assert "Not for mcpd&#x27;s servers" in page
    assert "relay of the server &#x27;web&#x27;" in page
    assert "<code>mcpd dashboard</code>" in page


async def test_many_refusals_are_warned_of_a_few_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusals = ServerRefusals()
    caller = owned_by(Holder(uid=1000, server="notes", pid=77))
    with caplog.at_level(logging.WARNING):
        for _ in range(50):
            await refused(caller, acting=True, refusals=refusals)
    assert 1 <= len(caplog.messages) < 50
