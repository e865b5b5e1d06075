"""How a failure leaves a transport's nursery: the caller's own exception, bare."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocol.jsonrpc.reply_faults import MessageTooLarge
from transports.errors import (
    AuthError,
    HttpRPCError,
    HTTPStatusError,
    TransportError,
    single_exceptions,
)


async def test_the_bodys_exception_leaves_the_nursery_bare() -> None:
    with pytest.raises(KeyError), single_exceptions():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            raise KeyError("the caller's own")


async def test_a_cancellation_wins_over_a_failure_that_came_with_it() -> None:
    with trio.CancelScope() as scope:

        async def fail_once_cancelled() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise TransportError("s exited while mcpd was stopping")

        with single_exceptions():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fail_once_cancelled)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                await trio.sleep_forever()
    assert scope.cancelled_caught


async def test_two_failures_stay_a_group() -> None:
    async def fail(exc: Exception) -> None:
        raise exc

    with pytest.raises(ExceptionGroup) as caught, single_exceptions():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail, KeyError("a"))
            nursery.start_soon(fail, ValueError("b"))
    assert {type(e) for e in caught.value.exceptions} == {KeyError, ValueError}


def test_what_breakers_count_and_what_they_do_not() -> None:
    # Availability failures share one base; a server that answered is up.
    assert issubclass(AuthError, HTTPStatusError) and issubclass(HTTPStatusError, TransportError)
    assert not issubclass(MessageTooLarge, TransportError)
    assert not issubclass(HttpRPCError, TransportError)
    error = HttpRPCError(-32001, "no", http_status=400)
    assert (error.code, error.message, error.http_status) == (-32001, "no", 400)
    assert TransportError("s: down", detail="stderr tail").describe() == "s: down\nstderr tail"
