"""The transport interface as the daemon sees it: every member, on each of the three
transports, means what ``transports.base.Transport`` says it means; and the answers
to a server's own requests."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from tests.support.http_servers.legacy_sse import Message, Session, answer, serve_legacy_sse
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from tests.support.system.procs import scripted
from transports.base import Transport, answer_server_request, default_answer
from transports.errors import TransportClosed
from transports.http.transport import open_http_transport
from transports.sse.transport import open_legacy_sse_transport
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport

LIMIT = 10
KINDS = ["stdio", "http", "sse"]


async def echo(req: SeenRequest, respond: Responder) -> None:
    if req.rpc_id is None:
        await respond.reply(202)
    else:
        await respond.json(result(req.rpc_id, {"method": req.rpc_method}))


async def hold_calls(req: SeenRequest, respond: Responder) -> None:
    if req.rpc_method == "tools/call":
        await trio.sleep_forever()  # until the client goes
    await echo(req, respond)


async def hold_calls_sse(session: Session, msg: Message) -> None:
    if msg.get("method") != "tools/call":
        await answer(session, msg)


@contextlib.asynccontextmanager
async def opened(kind: str, *, calls_answered: bool = True) -> AsyncIterator[Transport]:
    """A transport of ``kind``; its server leaves tools/call unanswered unless
    ``calls_answered``."""
    if kind == "stdio":
        command, args = scripted() if calls_answered else scripted("--hang-on-call")
        async with open_stdio_transport("s", StdioParams(command=command, args=args)) as t:
            yield t
    elif kind == "http":
        responder = echo if calls_answered else hold_calls
        async with serve_http(responder) as srv, open_http_transport("h", srv.url()) as t:
            yield t
    else:
        on_message = answer if calls_answered else hold_calls_sse
        async with (
            serve_legacy_sse(on_message) as srv,
            open_legacy_sse_transport("e", srv.url()) as t,
        ):
            yield t


@pytest.mark.parametrize("kind", KINDS)
async def test_what_the_owner_sets_starts_unset(kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with opened(kind) as t:
            assert (t.on_request, t.auth, t.era, t.error) == (None, None, None, None)
            assert not t.closed.is_set()


@pytest.mark.parametrize("kind", KINDS)
async def test_closed_is_set_with_the_reason_once_the_transport_is_left(kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with opened(kind) as t:
            await t.request("ping", None)
        await t.closed.wait()
    assert isinstance(t.error, TransportClosed)
    with pytest.raises(TransportClosed):
        await t.request("ping", None)


@pytest.mark.parametrize("kind", KINDS)
async def test_listen_returns_at_once_where_nothing_else_is_pushed(kind: str) -> None:
    # A legacy Streamable HTTP session's push stream is test_legacy_streams'.
    with trio.fail_after(LIMIT):
        async with opened(kind) as t, trio.open_nursery() as nursery:
            t.era = "modern" if kind == "http" else "legacy"
            await nursery.start(t.listen)
            assert nursery.child_tasks == set()


@pytest.mark.parametrize("kind", KINDS)
async def test_only_stdio_has_a_process_and_its_stderr(kind: str) -> None:
    # What the tail holds is test_transport's (stdio): the failures quote it.
    with trio.fail_after(LIMIT):
        async with opened(kind) as t:
            if kind == "stdio":
                assert isinstance(t.pid, int) and t.pid > 0
                assert isinstance(t.stderr_tail(), list)
            else:
                assert (t.pid, t.started, t.stderr_tail()) == (None, None, [])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_request_sent_without_waiting_is_answered_to_its_reply_once(kind: str) -> None:
    answers: list[tuple[Any, Exception | None]] = []
    got = trio.Event()

    def reply(raw: msgspec.Raw | None, error: Exception | None) -> None:
        answers.append((None if raw is None else json.loads(bytes(raw)), error))
        got.set()

    with trio.fail_after(LIMIT):
        async with opened(kind) as t:
            rid = t.send("ping", None, reply)
            await got.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert len(answers) == 1 and answers[0][1] is None, answers
            t.forget(rid, "answered already: nothing to tell the server")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_request_sent_without_waiting_fails_once_as_its_transport_closes(
    kind: str,
) -> None:
    answers: list[tuple[Any, Exception | None]] = []
    with trio.fail_after(LIMIT):
        async with opened(kind, calls_answered=False) as t:
            t.send("tools/call", {"name": "x"}, lambda raw, error: answers.append((raw, error)))
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []  # the server keeps it waiting
        await t.closed.wait()
    assert len(answers) == 1, answers
    raw, error = answers[0]
    assert raw is None and isinstance(error, TransportClosed), answers


@pytest.mark.parametrize("kind", KINDS)
async def test_a_request_forgotten_is_never_answered(kind: str) -> None:
    answers: list[tuple[Any, Exception | None]] = []
    with trio.fail_after(LIMIT):
        async with opened(kind, calls_answered=False) as t:
            call = {"name": "x"}
            rid = t.send("tools/call", call, lambda raw, error: answers.append((raw, error)))
            await trio.testing.wait_all_tasks_blocked()
            t.forget(rid, "the caller gave up")
            await trio.testing.wait_all_tasks_blocked()
        await t.closed.wait()
    assert answers == []


@pytest.mark.parametrize("kind", KINDS)
async def test_a_new_handshake_may_begin_on_every_transport(kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with opened(kind) as t:
            t.reset_session()
            assert (await t.request("ping", None)) is not None


# -- a server's own requests --


def _decoded(line: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(line)
    return value


def test_without_anyone_to_answer_ping_works_and_the_rest_is_refused() -> None:
    assert _decoded(default_answer(rpc.Request(7, "ping", None))) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {},
    }
    refused = _decoded(default_answer(rpc.Request("a", "sampling/createMessage", None)))
    assert refused["error"]["code"] == rpc.METHOD_NOT_FOUND
    assert "sampling/createMessage" in refused["error"]["message"]


async def test_a_handlers_answer_error_or_failure_goes_back_as_the_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def answers(req: rpc.Request) -> object:
        if req.method == "roots/list":
            return {"roots": []}
        if req.method == "elicitation/create":
            raise rpc.RPCError(-1, "the user declined")
        raise RuntimeError("a bug in the handler")

    async def answer(method: str) -> dict[str, Any]:
        return _decoded(await answer_server_request("s", answers, rpc.Request(1, method, None)))

    assert (await answer("roots/list"))["result"] == {"roots": []}
    assert (await answer("ping"))["result"] == {}  # never the handler's
    said = (await answer("elicitation/create"))["error"]
    assert said == {"code": -1, "message": "the user declined"}
    with caplog.at_level(logging.ERROR):
        failed = await answer("sampling/createMessage")
    assert failed["error"] == {"code": rpc.INTERNAL_ERROR, "message": "mcpd failed to answer"}
    assert "a bug in the handler" not in json.dumps(failed)
    assert "s: answering the server's sampling/createMessage request failed" in caplog.text
