"""Where a server's result is made fit for agents (``rpc_results``): at once, in the
server's own thread while the event loop serves everyone else, or not at all for a
reply too large to take apart, which fails only its own request."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.agents.calls.result_bounds import DATA_BYTES
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.servers.results.taking_apart import AT_ONCE_PARTS, MOST_PARTS, ReplyWork, TooComplex
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.clients.agent import connect, make_config, running
from tests.support.parts.held_walk import Held, hold

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "servers" / "bulky.py")
SECRET = "notes-secret-value-7f3a9c"


def holding_a_secret() -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.notes.env.TOKEN", SECRET)])
    return SecretGuard(known)


def bulky(count: int, meta: bytes = b'{"mcpd/server":"notes","k":1}') -> Raw:
    """A result with ``count`` empty objects and a ``_meta`` (with mcpd's key in it)."""
    empties = b",".join([b"{}"] * count)
    return Raw(b'{"content":[],"structuredContent":[' + empties + b'],"_meta":' + meta + b"}")


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    walk = hold(monkeypatch)
    yield walk
    walk.release.set()


# -- where the work is done --


async def test_a_short_reply_is_taken_apart_at_once(held: Held) -> None:
    held.release.set()
    got = await ReplyWork("evil", holding_a_secret()).result(bulky(10), "a tools/call result")
    assert json.loads(bytes(got))["_meta"] == {"k": 1}
    assert held.threads == [threading.get_ident()]


async def test_a_reply_of_many_values_is_taken_apart_while_the_loop_goes_on(held: Held) -> None:
    work = ReplyWork("evil", holding_a_secret())
    got: list[Raw] = []

    async def take_apart() -> None:
        got.append(await work.result(bulky(3 * AT_ONCE_PARTS), "a tools/call result"))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_apart)
            # Runs on the event loop only if the walk that holds does not hold the loop.
            await trio.to_thread.run_sync(held.entered.wait)
            assert not got
            held.release.set()
    assert held.threads and held.threads[0] != threading.get_ident()
    assert json.loads(bytes(got[0]))["_meta"] == {"k": 1}


async def test_one_servers_big_replies_are_taken_apart_one_at_a_time(held: Held) -> None:
    work = ReplyWork("evil", holding_a_secret())
    done: list[int] = []

    async def take_apart(n: int) -> None:
        await work.result(bulky(3 * AT_ONCE_PARTS), "a tools/call result")
        done.append(n)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_apart, 1)
            nursery.start_soon(take_apart, 2)
            await trio.to_thread.run_sync(held.entered.wait)
            await trio.testing.wait_all_tasks_blocked()
            assert len(held.threads) == 1  # the second waits for the server's thread
            held.release.set()
    assert sorted(done) == [1, 2] and len(held.threads) == 2


async def test_a_reply_of_too_many_values_is_refused_naming_its_size(
    held: Held, caplog: pytest.LogCaptureFixture
) -> None:
    raw = bulky(MOST_PARTS)
    with pytest.raises(TooComplex) as refused:
        await ReplyWork("evil", holding_a_secret()).result(raw, "a tools/call result")
    assert f"a tools/call result of {len(raw):,} bytes holds up to" in refused.value.reason
    assert f"more than the {MOST_PARTS:,} mcpd takes apart" in refused.value.reason
    assert isinstance(refused.value, MalformedReply)  # the server is up
    assert held.threads == []  # nothing was decoded
    assert "evil: a tools/call result of" in caplog.text


async def test_many_values_without_anything_to_change_pass_as_they_came() -> None:
    raw = bulky(MOST_PARTS, meta=b'{"k":1}')
    assert await ReplyWork("s", holding_a_secret()).result(raw, "a result") is raw


# -- an error's data --


def failing(count: int, data: bytes | None = None) -> rpc.RPCError:
    """A server's error as its transport hands it over: its data, ``count`` empty
    objects beside a key of mcpd's, as the bytes the server sent."""
    if data is None:
        data = b'{"x":[' + b",".join([b"{}"] * count) + b'],"mcpd/outage":"forged","k":1}'
    line = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no","data":' + data + b"}}"
    msg = envelope.decode_message(line)
    assert isinstance(msg, rpc.ErrorResponse)
    return rpc.RPCError.from_object(msg.error)


async def test_an_errors_data_of_many_values_is_taken_apart_while_the_loop_goes_on(
    held: Held,
) -> None:
    work = ReplyWork("evil", holding_a_secret())
    got: list[rpc.RPCError] = []

    async def take_apart() -> None:
        got.append(await work.error(failing(3 * AT_ONCE_PARTS), "a tools/call error"))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_apart)
            await trio.to_thread.run_sync(held.entered.wait)
            assert not got
            held.release.set()
    assert held.threads and held.threads[0] != threading.get_ident()
    data = json.loads(rpc.encode_error(1, got[0].code, got[0].message, got[0].data))["error"]
    assert "mcpd/outage" not in data["data"] and data["data"]["k"] == 1


async def test_an_errors_data_of_too_many_values_is_refused_as_a_result_is(
    held: Held, caplog: pytest.LogCaptureFixture
) -> None:
    exc = failing(MOST_PARTS)
    with pytest.raises(TooComplex) as refused:
        await ReplyWork("evil", holding_a_secret()).error(exc, "a tools/call error")
    size = len(exc.data)
    said = f"the data of a tools/call error of {size:,} bytes holds up to"
    assert said in refused.value.reason
    assert f"more than the {MOST_PARTS:,} mcpd takes apart" in refused.value.reason
    assert held.threads == []  # nothing was decoded
    assert f"evil: {said}" in caplog.text


async def test_an_errors_data_with_nothing_to_change_passes_as_it_came() -> None:
    exc = failing(0, b'{"x":[' + b",".join([b"{}"] * MOST_PARTS) + b"]}")
    assert await ReplyWork("s", holding_a_secret()).error(exc, "an error") is exc


# -- notifications --


def test_a_notification_loses_mcpds_keys_and_one_too_big_for_that_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    work = ReplyWork("evil", holding_a_secret())
    small = Raw(b'{"progress":1,"_meta":{"mcpd/server":"notes","k":1}}')
    got = work.notification(small, "notifications/progress")
    assert got is not None and json.loads(bytes(got))["_meta"] == {"k": 1}
    plain = Raw(b'{"progress":1,"data":' + bytes(bulky(3 * AT_ONCE_PARTS, b"{}")) + b"}")
    assert work.notification(plain, "notifications/message") is plain
    big = bulky(3 * AT_ONCE_PARTS)
    with caplog.at_level(logging.WARNING):
        assert work.notification(big, "notifications/message") is None
    assert 'evil: a "notifications/message" notification of' in caplog.text
    assert "and was dropped" in caplog.text


def test_a_secret_spelled_with_escapes_is_masked_where_mcpd_writes_a_notification_again() -> None:
    spelled = "".join(f"\\u{ord(c):04x}" for c in SECRET).encode()
    params = Raw(b'{"data":"' + spelled + b'","_meta":{"mcpd/server":"notes"}}')
    got = ReplyWork("evil", holding_a_secret()).notification(params, "notifications/message")
    assert got is not None and json.loads(bytes(got))["data"].startswith("[secret")


async def test_a_tasks_status_and_result_with_a_secret_spelled_with_escapes_are_masked() -> None:
    # mcpd writes each again, naming the task in its own terms for its agent.
    spelled = "".join(f"\\u{ord(c):04x}" for c in SECRET).encode()
    task = Raw(b'{"taskId":"t-1","status":"working","statusMessage":"' + spelled + b'"}')
    work = ReplyWork("evil", holding_a_secret())
    status = work.notification(task, "notifications/tasks", task=True)
    got = await work.result(task, "a tasks/get result", task=True)
    for made in (status, got):
        assert made is not None and json.loads(bytes(made))["statusMessage"].startswith("[secret")


# -- tasks (a tasks method's result, a task's status) --


def a_task(ask: str, count: int = 0) -> Raw:
    """A task waiting on a question, with ``count`` empty objects beside it and a key
    of mcpd's in its ``_meta``."""
    question = {"method": "elicitation/create", "params": {"message": ask, "requestedSchema": {}}}
    task = {
        "taskId": "t",
        "status": "input_required",
        "inputRequests": {"a": question},
        "x": [{}] * count,
        "_meta": {"mcpd/server": "n"},
    }
    return Raw(json.dumps(task).encode())


async def test_a_tasks_result_is_taken_apart_where_its_size_says(held: Held) -> None:
    work = ReplyWork("evil", holding_a_secret())
    got: list[Raw] = []

    async def take_apart() -> None:
        raw = a_task("Approve it?\u200b", 3 * AT_ONCE_PARTS)
        got.append(await work.result(raw, "a tasks/get result", task=True))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_apart)
            await trio.to_thread.run_sync(held.entered.wait)
            assert not got
            held.release.set()
    assert held.threads and held.threads[0] != threading.get_ident()
    asked = json.loads(bytes(got[0]))["inputRequests"]["a"]["params"]
    assert asked["message"].split("\n") == ["[mcpd] The server 'evil' asks:", "> Approve it?"]
    with pytest.raises(TooComplex, match="a tasks/get result of"):
        await work.result(a_task("Approve it?", MOST_PARTS), "a tasks/get result", task=True)


def test_a_tasks_status_is_made_as_its_result_is_and_one_too_big_for_that_dropped(
    held: Held, caplog: pytest.LogCaptureFixture
) -> None:
    held.release.set()
    work = ReplyWork("evil", SecretGuard(KnownSecrets()))
    got = work.notification(a_task("Approve it?"), "notifications/tasks", task=True)
    assert got is not None
    status = json.loads(bytes(got))
    assert status["_meta"] == {}
    assert status["inputRequests"]["a"]["params"]["_meta"] == {"mcpd/server": "evil"}
    big = a_task("Approve it?", 3 * AT_ONCE_PARTS)
    with caplog.at_level(logging.WARNING):
        assert work.notification(big, "notifications/tasks", task=True) is None
    assert 'evil: a "notifications/tasks" notification of' in caplog.text
    assert held.threads == [threading.get_ident()]  # the small one's, at once


# -- through a running daemon --


def bulky_config(tmp_path: Path) -> Any:
    server = {"command": sys.executable, "args": [SERVER]}
    return make_config(tmp_path, {"big": server, "small": server})


async def test_another_servers_call_is_answered_while_a_big_reply_is_taken_apart(
    tmp_path: Path, held: Held
) -> None:
    cfg = bulky_config(tmp_path)
    answers: list[str] = []
    with trio.fail_after(60):
        async with running(cfg), connect(cfg.daemon.socket) as agent:

            async def big_call() -> None:
                result = await agent.call("mcp__big__bulky", {"count": 3 * AT_ONCE_PARTS})
                assert result["_meta"] == {"kept": 1}
                answers.append("big")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(big_call)
                await trio.to_thread.run_sync(held.entered.wait)
                pong = await agent.call("mcp__small__ping")
                assert pong["content"][0]["text"] == "pong"
                answers.append("small")
                held.release.set()
    assert answers == ["small", "big"]


async def test_a_reply_too_big_to_take_apart_fails_only_its_own_call(tmp_path: Path) -> None:
    cfg = bulky_config(tmp_path)
    with trio.fail_after(60):
        async with running(cfg), connect(cfg.daemon.socket) as agent:
            refused = await agent.call("mcp__big__bulky", {"count": MOST_PARTS})
            assert refused["isError"] is True
            said = refused["content"][0]["text"]
            assert "holds up to" in said and "mcpd takes apart" in said
            pong = await agent.call("mcp__big__ping")
            assert pong["content"][0]["text"] == "pong"
            fine = await agent.call("mcp__big__bulky", {"count": 3})
            assert fine["_meta"] == {"kept": 1} and "isError" not in fine


async def test_an_error_whose_data_is_too_big_to_take_apart_fails_only_its_own_call(
    tmp_path: Path,
) -> None:
    cfg = bulky_config(tmp_path)
    with trio.fail_after(60):
        async with running(cfg), connect(cfg.daemon.socket) as agent:
            refused = await agent.call("mcp__big__fails", {"count": MOST_PARTS})
            assert refused["isError"] is True
            said = refused["content"][0]["text"]
            assert "the data of a tools/call error of" in said and "mcpd takes apart" in said
            pong = await agent.call("mcp__big__ping")
            assert pong["content"][0]["text"] == "pong"
            for count in (3, 3 * AT_ONCE_PARTS):
                reply = await agent.rpc(
                    "tools/call", {"name": "mcp__big__fails", "arguments": {"count": count}}
                )
                data = reply["error"]["data"]
                if count > 3:
                    # Taken apart in the server's thread, then larger than an agent is
                    # handed of an error's data: its size, in mcpd's words.
                    assert isinstance(data, str) and f"at most {DATA_BYTES} bytes" in data
                    continue
                assert data["kept"] == 1 and "mcpd/outage" not in data and len(data["x"]) == count
