"""Which agents' ended requests a server may still be asking about."""

from __future__ import annotations

import trio
import trio.testing

from mcpd.servers.asking.ended_asks import GRACE, KEPT, EndedAsks


async def test_an_ended_request_counts_until_its_grace_passes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended = EndedAsks()
    owner = object()
    ended.add("call", owner)
    assert ended.owners() == {id(owner)}
    await trio.sleep(GRACE)
    assert ended.owners() == set()


async def test_past_the_bound_no_agent_is_taken_for_the_cause_until_the_grace_passes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended = EndedAsks()
    for n in range(KEPT + 1):
        ended.add(n, object())
    # The forgotten request was some agent's: none can be ruled out.
    assert ended.owners() is None
    await trio.sleep(GRACE)
    assert ended.owners() == set()


async def test_an_ended_request_its_server_answered_after_all_counts_no_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended = EndedAsks()
    gone, other = object(), object()
    ended.add("call", gone, rid=7)
    ended.add("other", other, rid=8)
    ended.answered(7)
    assert ended.owners() == {id(other)}
    ended.answered(7)  # once is enough; an id never ended is nothing
    ended.answered(99)
    assert ended.owners() == {id(other)}


async def test_a_request_answered_that_was_sent_after_an_end_shows_the_server_read_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A server reads its requests in order: answering one sent after a cancel, it has
    # read that cancel, and asks nothing more about what it ended.
    ended = EndedAsks()
    early, late = object(), object()
    ended.add("first", early, mark=5)
    ended.add("second", late, mark=9)
    ended.read_past(4)  # sent before either ended: tells nothing
    assert ended.owners() == {id(early), id(late)}
    ended.read_past(7)
    assert ended.owners() == {id(late)}
    ended.read_past(10)
    assert ended.owners() == set()


async def test_a_server_that_works_concurrently_is_done_with_an_ended_request_by_its_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Answering a request sent after the cancel, it read the cancel; once it is seen to
    # work on requests at once, the work begun before may still ask about it.
    ended = EndedAsks()
    gone = object()
    ended.add("first", gone, rid=3, mark=5)
    ended.read_past(7)
    assert ended.owners() == set()
    ended.works_concurrently()
    assert ended.owners() == {id(gone)}  # what it seemed done with counts again
    ended.read_past(9)
    assert ended.owners() == {id(gone)}
    ended.answered(3)
    assert ended.owners() == set()


async def test_an_answer_while_an_older_request_is_open_shows_the_server_works_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended = EndedAsks()
    gone = object()
    ended.add("first", gone, mark=5)
    ended.answered_at(7, oldest_open=None)  # nothing older open: in order, read past it
    assert ended.owners() == set()
    ended.answered_at(9, oldest_open=10)  # only later ones are open: still in order
    assert ended.owners() == set()
    ended.answered_at(11, oldest_open=6)  # one sent before it is still open
    assert ended.owners() == {id(gone)}
