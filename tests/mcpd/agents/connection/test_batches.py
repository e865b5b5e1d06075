"""JSON-RPC batches from an agent (2025-03-26 allowed them): one array in, the answers
out as one array, each message run as if it had come alone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from mcpd.agents.connection.batches import MAX_MESSAGES, Batches
from tests.support.clients.agent import make_config, running
from tests.support.daemons.supervision import server

INIT = {
    "protocolVersion": "2025-03-26",
    "capabilities": {},
    "clientInfo": {"name": "old-client", "version": "1"},
}


class Raw:
    """An agent that writes lines as they are and reads every line back, arrays too."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def send(self, *messages: Any) -> None:
        await self.stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def line(self) -> Any:
        while b"\n" not in self.buf:
            chunk = await self.stream.receive_some(1 << 16)
            assert chunk, "mcpd closed the connection"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)


@asynccontextmanager
async def legacy_agent(path: str) -> AsyncIterator[Raw]:
    stream = await trio.open_unix_socket(path)
    agent = Raw(stream)
    await agent.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert (await agent.line())["result"]["protocolVersion"] == "2025-03-26"
    await agent.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    try:
        yield agent
    finally:
        await stream.aclose()


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    out = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        out["params"] = params
    return out


def by_id(answers: list[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for a in answers:
        out.setdefault(a.get("id"), []).append(a)
    return out


async def test_a_batch_is_answered_with_one_array(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    call = {"name": "mcp__s__tool0", "arguments": {"text": "x"}}
    with trio.fail_after(30):
        async with running(cfg) as daemon, legacy_agent(daemon.socket_path) as agent:
            await agent.send(
                [
                    request(2, "ping"),
                    request(3, "tools/list"),
                    request(4, "tools/call", call),
                    {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
                    42,
                    request(2, "ping"),  # an id this batch already uses
                ]
            )
            answers = await agent.line()
            assert isinstance(answers, list) and len(answers) == 5
            got = by_id(answers)
            assert got[3][0]["result"]["tools"][0]["name"] == "mcp__s__tool0"
            assert got[4][0]["result"]["content"][0]["text"] == "tool0:x"
            assert sorted(("result" in a, "error" in a) for a in got[2]) == [
                (False, True),
                (True, False),
            ]
            assert got[None][0]["error"]["code"] == -32600  # 42 is no message

            # Notifications only: nothing comes back for the batch.
            await agent.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
            await agent.send(request(5, "ping"))
            assert (await agent.line())["id"] == 5
            # An empty batch is one error, not an array.
            await agent.send([])
            empty = await agent.line()
            assert empty["id"] is None and "an empty batch" in empty["error"]["message"]


async def test_a_long_listing_asked_in_a_batch_is_in_its_array_whole(tmp_path: Path) -> None:
    # Past what a listing is made whole up to: alone, it would be written in pieces.
    cfg = make_config(tmp_path, {"s": server("--tools", "300")})
    with trio.fail_after(30):
        async with running(cfg) as daemon, legacy_agent(daemon.socket_path) as agent:
            await agent.send([request(2, "tools/list"), request(3, "ping")])
            answers = await agent.line()
            got = by_id(answers)
            names = [t["name"] for t in got[2][0]["result"]["tools"]]
            assert names == sorted(f"mcp__s__tool{i}" for i in range(300))
            assert got[3][0]["result"] == {}


async def test_a_cancelled_request_leaves_its_batch_to_the_rest(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"slow": server("--slow", "30")})
    call = {"name": "mcp__slow__tool0", "arguments": {}}
    with trio.fail_after(30):
        async with running(cfg) as daemon, legacy_agent(daemon.socket_path) as agent:
            await agent.send([request("long", "tools/call", call), request(7, "ping")])
            runner = daemon.supervisor.servers["slow"]
            while runner.inflight == 0:
                await trio.sleep(0.01)
            cancel = {"requestId": "long", "reason": "no longer needed"}
            await agent.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            )
            # A cancelled request gets no answer: the batch is the ping's alone.
            answers = await agent.line()
            assert [a["id"] for a in answers] == [7] and "result" in answers[0]


async def test_a_batch_over_the_limit_is_refused_whole(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    call = {"name": "mcp__s__tool0", "arguments": {"text": "x"}}
    with trio.fail_after(30):
        async with running(cfg) as daemon, legacy_agent(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["s"]
            pings = [request(f"p{i}", "ping") for i in range(MAX_MESSAGES)]
            await agent.send([request("c", "tools/call", call), *pings])
            refused = await agent.line()
            assert refused["id"] is None and refused["error"]["code"] == -32600
            assert f"limit of {MAX_MESSAGES} messages per batch" in refused["error"]["message"]
            # None of its messages ran: the call the server answers next is the first.
            await agent.send(request("alone", "tools/call", call))
            alone = await agent.line()
            assert alone["id"] == "alone" and "result" in alone
            assert runner.stats.calls == 1

            # A batch at the limit is run and answered whole.
            await agent.send([request("c", "tools/call", call), *pings[1:]])
            answers = by_id(await agent.line())
            assert len(answers) == MAX_MESSAGES
            assert answers["c"][0]["result"]["content"][0]["text"] == "tool0:x"


async def test_answers_held_for_batches_that_never_end_are_bounded(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"stuck": server("--hang-on-call")})
    call = {"name": "mcp__stuck__tool0", "arguments": {}}
    discovers = [request(f"d{i}", "server/discover") for i in range(MAX_MESSAGES - 1)]
    with trio.fail_after(30):
        async with running(cfg) as daemon, legacy_agent(daemon.socket_path) as agent:
            # Each batch's answers are held for as long as its call hangs: once they add
            # up, the next batch is refused rather than held too.
            refused = None
            for n in range(64):
                await agent.send([request(f"hang{n}", "tools/call", call), *discovers])
                await agent.send(request(f"after{n}", "ping"))
                line = await agent.line()
                if line.get("id") != f"after{n}":
                    refused = line
                    assert (await agent.line())["id"] == f"after{n}"
                    break
            assert refused is not None, "every batch was held"
            assert refused["id"] is None and refused["error"]["code"] == -32600
            assert "bytes of answers to batches not yet complete" in refused["error"]["message"]
            # The connection and the others are still answered.
            await agent.send(request("still", "ping"))
            assert (await agent.line())["id"] == "still"
            async with legacy_agent(daemon.socket_path) as other:
                await other.send([request(1, "ping")])
                assert [a["id"] for a in await other.line()] == [1]


def test_one_batch_of_large_answers_holds_no_more_than_the_bound() -> None:
    """Its answers all wait for its last: those past the bound are kept as errors that
    say so, each for its own request, and the batch still gets an answer for each."""
    batches = Batches(max_held=1000)
    line = json.dumps([request(i, "tools/list") for i in range(4)]).encode()
    sent: list[bytes] = []
    assert len(batches.start(line, (), sent.append)) == 4 and not sent
    large = b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[],"pad":"' + b"x" * 400 + b'"}}'
    for i in range(3):
        assert batches.answer(i, large % i) is None
        assert batches.held <= 1000 + 512  # the bound, and at most an error's few words
    done = batches.answer(3, large % 3)
    assert done is not None and batches.held == 0
    answers = json.loads(done)
    assert [a["id"] for a in answers] == [0, 1, 2, 3]
    assert [("result" in a) for a in answers] == [True, True, False, False]
    assert "was not kept" in answers[2]["error"]["message"]
    assert "send this request alone" in answers[3]["error"]["message"]
