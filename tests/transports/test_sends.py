"""Requests sent without their sender waiting (``transports.sends``), against a
request function the test answers by hand: each reply comes once, no more exchanges
run at once than the transport has connections, a request forgotten is never sent
(or is cut off where it is under way, and no reply follows), and a transport that
closes tells every sender whose request it still held."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

import pytest
import trio
import trio.testing
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.splice import SplicedCall
from transports.base import Params, ReplySink
from transports.errors import TransportClosed, TransportError
from transports.sends import Sends

caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="nobody")


class Server:
    """The request function: each request waits until the test answers it."""

    def __init__(self) -> None:
        self.under_way: dict[str, trio.Event] = {}
        self.answers: dict[str, Raw | Exception] = {}
        self.sent: list[str] = []
        self.cancelled: list[str] = []
        self.callers: list[str] = []
        self.tasks: list[object] = []
        self.most = 0

    async def request(
        self, method: str, params: Params | SplicedCall, headers: Mapping[str, str] | None
    ) -> Raw:
        self.sent.append(method)
        self.callers.append(caller.get())
        self.tasks.append(trio.lowlevel.current_task())
        done = self.under_way[method] = trio.Event()
        self.most = max(self.most, len(self.under_way))
        try:
            await done.wait()
        except trio.Cancelled:
            self.cancelled.append(method)
            raise
        finally:
            del self.under_way[method]
        answer = self.answers.pop(method)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def answer(self, method: str, answer: Raw | Exception) -> None:
        self.answers[method] = answer
        self.under_way[method].set()


class Replies:
    def __init__(self) -> None:
        self.got: dict[str, list[tuple[Raw | None, Exception | None]]] = {}

    def to(self, method: str) -> ReplySink:
        def reply(raw: Raw | None, error: Exception | None) -> None:
            self.got.setdefault(method, []).append((raw, error))

        return reply


def sends(server: Server, workers: float = 4) -> Sends:
    return Sends("srv", server.request, workers)


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_a_request_sent_before_the_transport_opens_is_refused_at_once() -> None:
    s = sends(Server())
    with pytest.raises(TransportClosed, match="srv: transport closed"):
        s.send("m", None, lambda raw, error: None, None)


async def test_each_request_gets_its_answer_or_its_failure_once() -> None:
    server, replies = Server(), Replies()
    s = sends(server)
    async with s.running():
        s.send("ok", None, replies.to("ok"), None)
        s.send("bad", None, replies.to("bad"), None)
        s.send("gone", None, replies.to("gone"), None)
        await settle()
        server.answer("ok", Raw(b'{"x":1}'))
        server.answer("bad", rpc.RPCError(rpc.INVALID_PARAMS, "no"))
        server.answer("gone", TransportError("srv: connection reset"))
        await settle()
    assert replies.got["ok"] == [(Raw(b'{"x":1}'), None)]
    ((raw, error),) = replies.got["bad"]
    assert raw is None and isinstance(error, rpc.RPCError) and error.message == "no"
    ((raw, error),) = replies.got["gone"]
    assert raw is None and isinstance(error, TransportError) and "reset" in error.reason


async def test_no_more_exchanges_run_at_once_than_there_are_workers() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=2)
    names = [f"m{i}" for i in range(5)]
    async with s.running():
        for name in names:
            s.send(name, None, replies.to(name), None)
        await settle()
        assert server.sent == ["m0", "m1"]
        while server.under_way:
            for name in list(server.under_way):
                server.answer(name, Raw(b"{}"))
            await settle()
    assert server.most == 2 and server.sent == names
    assert sorted(replies.got) == names
    assert len(set(map(id, server.tasks))) <= 2


async def test_a_request_forgotten_while_queued_is_never_sent_nor_answered() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=1)
    async with s.running():
        s.send("first", None, replies.to("first"), None)
        key = s.send("second", None, replies.to("second"), None)
        s.send("third", None, replies.to("third"), None)
        await settle()
        s.forget(key)
        server.answer("first", Raw(b"{}"))
        await settle()
        server.answer("third", Raw(b"{}"))
        await settle()
    assert server.sent == ["first", "third"]
    assert "second" not in replies.got and sorted(replies.got) == ["first", "third"]


async def test_a_request_forgotten_under_way_is_cut_off_and_the_queue_goes_on() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=1)
    async with s.running():
        key = s.send("slow", None, replies.to("slow"), None)
        s.send("next", None, replies.to("next"), None)
        await settle()
        s.forget(key)
        await settle()
        assert server.cancelled == ["slow"]
        assert server.sent == ["slow", "next"]  # a new worker took the next one
        server.answer("next", Raw(b"{}"))
        await settle()
    assert "slow" not in replies.got and replies.got["next"] == [(Raw(b"{}"), None)]


async def test_forgetting_what_is_unknown_or_answered_does_nothing() -> None:
    server, replies = Server(), Replies()
    s = sends(server)
    async with s.running():
        key = s.send("m", None, replies.to("m"), None)
        await settle()
        server.answer("m", Raw(b"{}"))
        await settle()
        s.forget(key)
        s.forget(12345)
        s.forget("not-an-int-key")
        s.send("after", None, replies.to("after"), None)
        await settle()
        server.answer("after", Raw(b"{}"))
        await settle()
    assert replies.got == {"m": [(Raw(b"{}"), None)], "after": [(Raw(b"{}"), None)]}


async def test_a_transport_that_closes_tells_every_sender_it_still_held() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=1)
    async with s.running():
        s.send("under_way", None, replies.to("under_way"), None)
        s.send("queued", None, replies.to("queued"), None)
        await settle()
    for method in ("under_way", "queued"):
        ((raw, error),) = replies.got[method]
        assert raw is None and isinstance(error, TransportClosed)
    with pytest.raises(TransportClosed):
        s.send("late", None, replies.to("late"), None)


async def test_a_transport_closing_as_its_only_request_is_forgotten_still_tells_the_queue() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=1)
    async with s.running():
        key = s.send("forgotten", None, replies.to("forgotten"), None)
        s.send("queued", None, replies.to("queued"), None)
        await settle()
        s.forget(key)  # and the transport closes before its worker has gone
    assert "forgotten" not in replies.got
    ((raw, error),) = replies.got["queued"]
    assert raw is None and isinstance(error, TransportClosed)


async def test_a_request_sent_as_an_answer_arrives_is_taken_by_the_same_worker() -> None:
    server, replies = Server(), Replies()
    s = sends(server)

    def then_send(raw: Raw | None, error: Exception | None) -> None:
        replies.to("first")(raw, error)
        s.send("second", None, replies.to("second"), None)

    async with s.running():
        s.send("first", None, then_send, None)
        await settle()
        server.answer("first", Raw(b"{}"))
        await settle()
        server.answer("second", Raw(b"{}"))
        await settle()
    assert sorted(replies.got) == ["first", "second"]
    first_task, second_task = server.tasks
    assert first_task is second_task


async def test_only_a_request_kept_in_its_senders_context_sees_its_variables() -> None:
    server, replies = Server(), Replies()
    s = sends(server, workers=1)
    async with s.running():
        token = caller.set("agent-7")
        try:
            s.send("kept", None, replies.to("kept"), None, keep_context=True)
        finally:
            caller.reset(token)
        await settle()
        server.answer("kept", Raw(b"{}"))
        await settle()
        # Another sender's request, on the worker the first one started.
        s.send("plain", None, replies.to("plain"), None)
        await settle()
        server.answer("plain", Raw(b"{}"))
        await settle()
    assert server.tasks[0] is server.tasks[1]
    assert server.callers == ["agent-7", "nobody"]
