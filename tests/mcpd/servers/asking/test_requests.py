"""Requests other than tools/call, sent to one server's runner directly against a
transport the test plays: what the agent gets back for each way the server answers
(a result, a JSON-RPC error, nothing, a failure, a cancellation), what the server is
sent, and what a server that is down or still starting does to them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, cast

import msgspec
import pytest
import trio
import trio.testing
from msgspec import UNSET, Raw

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.asking import requests
from mcpd.servers.calling.calls import CallRefused, Whose
from mcpd.servers.calling.queue_bytes import MIB, Unqueued
from mcpd.servers.life.lazy import runner_of
from mcpd.servers.life.server_parts import ServerParts
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.mcp import core as mcp
from protocol.mcp.features import GetPromptParams, ReadResourceParams
from tests.support.parts.stand_in import Never, StandIn
from transports.base import AuthHook, NotificationHandler, Transport
from transports.errors import HTTPStatusError, ServerCancelled, TransportClosed

SECRET = "tok-0123456789abcdef"


class Played(StandIn):
    """A legacy server with prompts and resources; ``answers`` says what each of the
    agent's methods gets, and the params each was sent are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, Any] = {}
        self.params: dict[str, Any] = {}

    def answer(self, method: str, params: Any) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": mcp.LATEST_LEGACY,
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            }
        if method in ("tools/list", "prompts/list", "resources/list"):
            return {method.split("/")[0]: []}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method in self.answers:
            self.params[method] = params
            return self.answers[method]
        return super().answer(method, params)


class Factory:
    def __init__(self) -> None:
        self.played = Played()
        self.refuse: Exception | None = None

    @contextlib.asynccontextmanager
    async def __call__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        on: NotificationHandler,
        auth: AuthHook | None,
    ) -> AsyncIterator[Transport]:
        if self.refuse is not None:
            raise self.refuse
        yield cast(Transport, self.played)


def config(daemon: dict[str, Any] | None = None, **server: Any) -> Config:
    data = {"daemon": daemon or {}, "servers": {"s": {"command": "srv", **server}}}
    return parse_config(data, env={"HOME": "/nonexistent"})


@contextlib.asynccontextmanager
async def running(
    factory: Factory, daemon: dict[str, Any] | None = None, **server: Any
) -> AsyncIterator[ServerParts]:
    cfg = config(daemon, **server)
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.s.env.TOKEN", SECRET)])
    s = cfg.servers["s"]
    parts = ServerParts("s", s, cfg, Catalog(cfg.naming), lambda a: None, guard=SecretGuard(known))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner_of(parts, factory).run)
        yield parts
        nursery.cancel_scope.cancel()


async def ready(r: ServerParts) -> None:
    while r.state != "ready":
        await r.phase_changed()


PROMPT = GetPromptParams(name="p")


async def test_a_result_is_passed_on_and_the_agents_own_meta_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = {"messages": [], "description": "d"}
    async with running(factory) as r:
        await ready(r)
        meta = {"mine": 1, f"{mcp.RESERVED_META_PREFIX}x": 2}
        raw = await requests.send(r, "prompts/get", GetPromptParams(name="p", meta=meta), name="p")
    assert json.loads(bytes(raw)) == {"messages": [], "description": "d"}
    sent = factory.played.params["prompts/get"]
    # A legacy server is sent the agent's own keys, never the reserved ones.
    assert sent.meta == {"mine": 1}
    assert sent.name == "p"


async def test_a_legacy_server_gets_no_round_fields_and_its_result_type_is_left_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A legacy server's era has no rounds of input: it is not sent what continues one,
    and what it writes under ``resultType`` makes its result nothing but a result."""
    factory = Factory()
    asked = {"resultType": "input_required", "messages": [], "requestState": "s"}
    factory.played.answers["prompts/get"] = asked
    async with running(factory) as r:
        await ready(r)
        retry = GetPromptParams(name="p", inputResponses=Raw(b'{"k":{}}'), requestState=Raw(b'"s"'))
        raw = await requests.send(r, "prompts/get", retry, name="p")
    assert json.loads(bytes(raw)) == {"messages": [], "requestState": "s"}
    sent = factory.played.params["prompts/get"]
    assert (sent.inputResponses, sent.requestState) == (UNSET, UNSET)


async def test_a_secret_in_a_result_is_masked(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory()
    factory.played.answers["resources/read"] = {"contents": [{"uri": "u", "text": SECRET}]}
    async with running(factory) as r:
        await ready(r)
        raw = await requests.send(r, "resources/read", ReadResourceParams(uri="u"))
    assert SECRET not in bytes(raw).decode()


async def test_a_json_rpc_error_is_passed_on_as_it_is_and_costs_the_server_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = rpc.RPCError(-32602, "no such prompt")
    async with running(factory) as r:
        await ready(r)
        for _ in range(10):
            with pytest.raises(rpc.RPCError) as info:
                await requests.send(r, "prompts/get", PROMPT)
            assert (info.value.code, info.value.message) == (-32602, "[s] no such prompt")
        assert r.breaker.state == "closed"
        assert r.state == "ready"


async def test_no_answer_within_the_limit_is_a_timeout_outage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = Never()
    async with running(factory) as r:
        await ready(r)
        start = trio.current_time()
        with pytest.raises(CallRefused) as info:
            await requests.send(r, "prompts/get", PROMPT, time_limit=7)
        assert trio.current_time() - start == pytest.approx(7)
    outage = info.value.outage
    assert (outage.server, outage.state) == ("s", "timeout")
    assert outage.reason == "no answer to prompts/get within 7 s"


async def test_the_configured_call_timeout_is_the_default_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = Never()
    async with running(factory, call_timeout=3) as r:
        await ready(r)
        with pytest.raises(CallRefused) as info:
            await requests.send(r, "prompts/get", PROMPT)
    assert info.value.outage.reason == "no answer to prompts/get within 3 s"


@pytest.mark.parametrize(
    ("failure", "state", "reason"),
    [
        # The server still serves: this request failed, not it.
        (TransportClosed(f"the server went away holding {SECRET}"), "degraded", "went away"),
        (MalformedReply(f"invalid UTF-8 after {SECRET}"), "malformed", "invalid UTF-8"),
        (ServerCancelled(f"cancelled: {SECRET}"), "failed", "cancelled"),
    ],
    ids=["transport failure", "malformed reply", "server cancelled"],
)
async def test_a_failure_is_an_outage_with_mcpds_secrets_masked(
    autojump_clock: trio.testing.MockClock, failure: Exception, state: str, reason: str
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = failure
    async with running(factory) as r:
        await ready(r)
        with pytest.raises(CallRefused) as info:
            await requests.send(r, "prompts/get", PROMPT)
    outage = info.value.outage
    assert (outage.server, outage.state) == ("s", state)
    assert reason in outage.reason
    assert SECRET not in outage.reason


@pytest.mark.parametrize(
    ("method", "params"), [("prompts/get", PROMPT), ("resources/read", ReadResourceParams(uri="u"))]
)
async def test_a_retry_after_holds_the_server_as_a_calls_does(
    autojump_clock: trio.testing.MockClock, method: str, params: msgspec.Struct
) -> None:
    """Answered 429 with Retry-After: the server said when to come back, whatever the
    method; it is not asked again before then, and the agent is told when that is."""
    factory = Factory()
    factory.played.answers[method] = HTTPStatusError("HTTP 429", status=429, retry_after=3600)
    async with running(factory) as r:
        await ready(r)
        now = trio.current_time()
        with pytest.raises(CallRefused) as info:
            await requests.send(r, method, params)
        outage = info.value.outage
        assert (outage.state, outage.retry_at) == ("open", pytest.approx(now + 3600))
        assert "HTTP 429" in outage.reason
        assert r.state == "open"
        await trio.sleep(60)
        with pytest.raises(CallRefused) as info:
            await requests.send(r, method, params)
        assert info.value.outage.retry_at == pytest.approx(now + 3600)
        assert factory.played.sent.count(method) == 1
        assert "ping" not in factory.played.sent


async def test_a_server_that_cannot_start_refuses_at_once_with_its_outage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.refuse = TransportClosed("cannot run srv: no such file")
    async with running(factory) as r:
        await r.first_attempt.wait()
        start = trio.current_time()
        with pytest.raises(CallRefused) as info:
            await requests.send(r, "prompts/get", PROMPT, time_limit=100)
        assert trio.current_time() == start
    assert "no such file" in (info.value.outage.reason or "")
    assert factory.played.params == {}


async def test_a_request_during_the_first_start_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = {"messages": []}
    async with running(factory) as r:
        # Sent before the runner has even begun its start.
        raw = await requests.send(r, "prompts/get", PROMPT)
    assert json.loads(bytes(raw)) == {"messages": []}


async def test_a_lazy_server_is_started_for_a_request_and_counts_it_as_a_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.played.answers["prompts/get"] = {"messages": []}
    async with running(factory, start="lazy", idle_stop=60) as r:
        await trio.testing.wait_all_tasks_blocked()
        assert r.phase == "idle"
        raw = await requests.send(r, "prompts/get", PROMPT)
        assert json.loads(bytes(raw)) == {"messages": []}
        assert r.phase == "connected"
        # Its use ended with the answer: left idle, it is stopped after idle_stop.
        await trio.sleep(61)
        assert r.phase == "idle"


async def test_requests_under_way_at_a_server_are_bounded_as_its_queue_is(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """They skip the call queue; without a bound an agent had thousands under way at a
    stdio server, with every agent's tools/call waiting behind them at its stdin."""
    factory = Factory()
    factory.played.answers["prompts/get"] = Never()
    async with running(factory, {"queue_size": 3}) as r:
        await ready(r)
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(requests.send, r, "prompts/get", PROMPT)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(CallRefused) as info:
                await requests.send(r, "prompts/get", PROMPT)
            assert info.value.outage.state == "busy"
            assert info.value.outage.reason == "3 requests already under way at this server"
            nursery.cancel_scope.cancel()
        assert r.scheduler.requests == 0  # each gave its place back as it ended
        factory.played.answers["prompts/get"] = {"messages": []}
        assert json.loads(bytes(await requests.send(r, "prompts/get", PROMPT))) == {"messages": []}


async def test_an_agents_requests_under_way_keep_bytes_to_its_bound_and_give_them_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server never answers: an agent's big prompts/get under way keep their bytes
    until they end, and its next past its bound is refused at once, never sent, while
    another agent's small one is; once they end, nothing is kept."""
    factory = Factory()
    factory.played.answers["prompts/get"] = Never()
    agent, other = Whose(1000, 11, False), Whose(1000, 12, False)
    big = GetPromptParams(name="p", arguments=Raw(b'"' + b"x" * (12 * MIB) + b'"'))
    async with running(factory) as r:
        await ready(r)
        waiting = r.scheduler.waiting
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(partial(requests.send, r, "prompts/get", big, whose=agent))
            await trio.testing.wait_all_tasks_blocked()
            assert waiting.of_agent(agent) > 24 * MIB
            sent = len(factory.played.sent)
            with pytest.raises(Unqueued) as info:
                await requests.send(r, "prompts/get", big, whose=agent)
            assert "one agent's may keep 32.0 MiB" in info.value.message
            assert len(factory.played.sent) == sent  # never sent
            nursery.start_soon(partial(requests.send, r, "prompts/get", PROMPT, whose=other))
            await trio.testing.wait_all_tasks_blocked()
            assert len(factory.played.sent) == sent + 1
            nursery.cancel_scope.cancel()
        assert waiting.total == 0  # each gave its bytes back as it ended
