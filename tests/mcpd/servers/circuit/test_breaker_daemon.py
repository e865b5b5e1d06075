"""The circuit breaker and the probes through a running daemon, against a legacy HTTP
server whose calls, lists and pings behave as each test sets: a server whose lists
work and whose calls fail is tried less and less often; a busy server whose lists are
slow is not taken for gone; calls refused while mcpd's probe is out are told its own
bound; a probe answered with a wait holds the circuit open, saying so everywhere;
what a prompts/get gets, an answer or an error, ends no trial of the calls; a
server that goes away while its circuit is open is shown unreachable and is
back as soon as it answers again; one whose failed calls end its session stays open
across the connections made again, and so does one that fails mcpd's probe by cutting
its connection."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.supervision import closed_port, text, wait_state
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    error,
    result,
    serve_http,
)

LIMIT = 60
WAIT = re.compile(r"mcpd will retry at \d\d:\d\d:\d\d \(in (\d+) s\)")


class Moody:
    """A legacy server whose calls fail (HTTP 500) or not, and whose lists and pings
    take as long as ``slow`` says (what it answers a request is decided as it arrives)."""

    def __init__(self) -> None:
        self.failing = False
        self.pings_fail = False
        self.pings_cut = False  # the connection dropped, the ping unanswered
        self.pings_wait = False  # answered 429, asking for an hour
        self.slow: dict[str, float] = {}
        self.seen: list[str] = []
        self.prompt_refused = False  # prompts/get answered with a JSON-RPC error
        self.probed = trio.Event()  # a ping or a tools/list answered
        self.session = LegacySession(self.handle, capabilities={"tools": {}, "prompts": {}})

    async def handle(self, req: SeenRequest, respond: Responder) -> None:
        method = req.rpc_method
        if req.method == "GET":
            await respond.reply(405)  # no push stream
            return
        if method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer
            return
        self.seen.append(str(method))
        await trio.sleep(self.slow.get(str(method), 0.0))
        if method == "ping" and self.pings_cut:
            await respond.cut()
        if method == "ping" and self.pings_wait:
            await respond.reply(429, "Too Many Requests", [("Retry-After", "3600")])
            return
        if method == "tools/list":
            tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
            await respond.json(result(req.rpc_id, {"tools": tools}))
        elif method == "prompts/list":
            await respond.json(result(req.rpc_id, {"prompts": [{"name": "pr"}]}))
        elif method == "prompts/get" and self.prompt_refused:
            await respond.json(error(req.rpc_id, -32602, "no such prompt"))
        elif method == "prompts/get":
            await respond.json(result(req.rpc_id, {"messages": []}))
        elif (method == "tools/call" and self.failing) or (method == "ping" and self.pings_fail):
            await respond.reply(500, "Internal Server Error")
        elif method == "tools/call":
            await respond.json(result(req.rpc_id, {"content": [{"type": "text", "text": "ok"}]}))
        else:
            await respond.json(result(req.rpc_id, {}))
        if method in ("ping", "tools/list"):
            self.probed.set()


class Journal(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def journal() -> Iterator[Journal]:
    said = Journal()
    logger = logging.getLogger("mcpd")
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    try:
        yield said
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)


def config(tmp_path: Path, url: str, **daemon: Any) -> Any:
    daemon.setdefault("health_interval", 0)
    return make_config(tmp_path, {"m": {"url": url}}, failure_threshold=1, **daemon)


async def call(agent: Agent) -> dict[str, Any]:
    return await agent.call("mcp__m__echo", {})


def waits(refused: dict[str, Any]) -> int:
    """How many seconds a refused call is told to wait."""
    assert refused["isError"], refused
    found = WAIT.search(text(refused))
    assert found, text(refused)
    return int(found.group(1))


async def test_a_server_whose_calls_fail_is_tried_less_often_though_it_answers_probes(
    tmp_path: Path,
) -> None:
    moody = Moody()
    with trio.fail_after(LIMIT):
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=1.0, cooldown_cap=8.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = True
                told = []
                for _ in range(3):
                    assert "HTTP 500" in text(await call(agent))
                    told.append(waits(await call(agent)))
                    # The probe is answered: closed on trial, its calls unproven.
                    row = await wait_state(agent, "m", "degraded")
                    assert "HTTP 500" in row["last_error"], row
                # Each call let through fails, and the wait doubles each time.
                assert told[0] < told[1] < told[2] and 3 <= told[2] <= 4, told
                assert row["breaker"]["opened"] == 3
                # Calls work again: the first is the recovery.
                moody.failing = False
                assert text(await call(agent)) == "ok"
                row = await wait_state(agent, "m", "ready")
                assert row["last_error"] is None


async def test_a_prompt_got_on_trial_decides_nothing_whatever_it_is_answered(
    tmp_path: Path,
) -> None:
    """Its calls fail; each time its circuit closes on trial a prompt is got, answered
    with an error or not: the trial waits for a call, which fails, and the wait
    doubles each time as it does without the prompts; nothing says it recovered."""
    moody = Moody()
    with trio.fail_after(LIMIT), journal() as said:
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=1.0, cooldown_cap=8.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = True
                told = []
                for refused in (True, False, True):
                    assert "HTTP 500" in text(await call(agent))
                    told.append(waits(await call(agent)))
                    await wait_state(agent, "m", "degraded")
                    moody.prompt_refused = refused
                    got = await agent.rpc("prompts/get", {"name": "mcp__m__pr"})
                    assert ("error" in got) == refused, got
                    # Still on trial, not recovered.
                    row = await wait_state(agent, "m", "degraded", "ready")
                    assert row["state"] == "degraded", row
                assert told[0] < told[1] < told[2] and 3 <= told[2] <= 4, told
    assert not [line for line in said.lines if "recovered" in line or "answering again" in line]


async def test_a_wait_a_probe_is_asked_for_is_said_where_the_circuit_s_next_probe_is(
    tmp_path: Path,
) -> None:
    """A call fails, opening the circuit for a second; the liveness probe it asks for
    is answered 429 with an hour's Retry-After: the journal, ``mcpd status`` and the
    calls refused all say the hour, and the 429 as the reason."""
    moody = Moody()
    with trio.fail_after(LIMIT), journal() as said:
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=1.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = moody.pings_wait = True
                moody.probed = trio.Event()
                assert "HTTP 500" in text(await call(agent))
                while "ping" not in moody.seen:
                    await trio.sleep(0.05)
                while not [line for line in said.lines if "429" in line]:
                    await trio.sleep(0.05)
                row = await wait_state(agent, "m", "open")
                assert "HTTP 429" in row["last_error"], row
                refused = await call(agent)
                assert "HTTP 429" in text(refused) and waits(refused) > 3500, text(refused)
    at = re.search(r"retry at (\d\d:\d\d:\d\d)", text(refused))
    assert at, text(refused)
    held = [line for line in said.lines if "429" in line and "next probe at" in line]
    assert held and held[-1].endswith(at.group(1)), held


async def test_a_busy_server_whose_lists_are_slow_is_not_taken_for_gone(tmp_path: Path) -> None:
    """Its lists take longer than a probe may, its calls are answered at once: the
    periodic check leaves it alone while it answers, and probes it with a ping."""
    moody = Moody()
    with trio.fail_after(LIMIT):
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), health_interval=0.5)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.slow["tools/list"] = 30.0
                for _ in range(25):  # past the 5 s a probe has
                    assert text(await call(agent)) == "ok"
                    with trio.move_on_after(0.3):
                        await trio.sleep_forever()
                # Idle now: it is probed, and answers.
                moody.probed = trio.Event()
                await moody.probed.wait()
                row = await wait_state(agent, "m", "ready")
                assert row["restarts"] == 0 and row["last_error"] is None
    assert "ping" in moody.seen


async def test_calls_refused_while_the_probe_is_out_are_told_its_own_bound(
    tmp_path: Path,
) -> None:
    moody = Moody()
    with trio.fail_after(LIMIT):
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=1.0, probe_timeout=3.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = True
                moody.probed = trio.Event()
                assert "HTTP 500" in text(await call(agent))
                await moody.probed.wait()  # the liveness probe the failure asked for
                # From now on the server takes its time to answer mcpd's probe.
                moody.slow = {"ping": 10.0, "tools/list": 10.0}
                await wait_state(agent, "m", "half_open")
                refused = await call(agent)
                assert "(half_open)" in text(refused), text(refused)
                # The probe's bound, not a call's time limit (a minute).
                assert waits(refused) <= 3


async def test_a_server_gone_while_its_circuit_is_open_is_unreachable_and_back_soon(
    tmp_path: Path,
) -> None:
    port = closed_port()
    # A long cooldown: only the backoff's delays may bring it back in time.
    cfg = config(tmp_path, f"http://127.0.0.1:{port}/mcp", cooldown_base=2.0)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            moody = Moody()
            async with serve_http(moody.session, port=port):
                await wait_state(agent, "m", "ready")
                moody.failing = True
                assert "HTTP 500" in text(await call(agent))
                await wait_state(agent, "m", "open")
            # The probe after the cooldown cannot connect: the session is over.
            row = await wait_state(agent, "m", "unreachable")
            assert "Connection refused" in row["last_error"], row
            async with serve_http(Moody().session, port=port):
                # Connected to again on the backoff's delays, on trial: its first
                # call succeeds.
                await wait_state(agent, "m", "degraded")
                assert text(await call(agent)) == "ok"
                row = await wait_state(agent, "m", "ready")
                assert row["breaker"]["state"] == "closed"


async def test_a_server_whose_failed_calls_end_its_session_stays_open_when_back(
    tmp_path: Path,
) -> None:
    """Its calls fail and so does the liveness probe they ask for: the session ends and
    is opened again on the backoff's delays, but the circuit stays open until its
    cooldown ends, and refused calls are told the true wait."""
    moody = Moody()
    with trio.fail_after(LIMIT), journal() as said:
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=30.0, cooldown_cap=60.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = moody.pings_fail = True
                assert "HTTP 500" in text(await call(agent))
                # Connected to again, and listed.
                while moody.seen.count("tools/list") < 2:
                    await trio.sleep(0.05)
                row = await wait_state(agent, "m", "open", "degraded")
                while row["restarts"] < 1 or row["state"] not in ("open", "degraded"):
                    row = await wait_state(agent, "m", "open", "degraded")
                assert row["state"] == "open", row
                for _ in range(3):
                    assert 25 <= waits(await call(agent)) <= 30
                assert moody.seen.count("tools/call") == 1
    assert not [line for line in said.lines if "available again" in line], said.lines
    assert any("circuit stays open" in line for line in said.lines), said.lines


async def test_a_server_that_cuts_the_probe_s_connection_stays_open_when_back(
    tmp_path: Path,
) -> None:
    """Its calls fail and it drops the connection of every ping: the probe after the
    cooldown fails, the session ends and is opened again at once, but the server was
    reached, so the circuit stays open until the longer cooldown ends; no call reaches
    it meanwhile and nothing says it recovered."""
    moody = Moody()
    with trio.fail_after(LIMIT), journal() as said:
        async with serve_http(moody.session) as web:
            cfg = config(tmp_path, web.url(), cooldown_base=2.0, cooldown_cap=60.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "m", "ready")
                moody.failing = moody.pings_cut = True
                assert "HTTP 500" in text(await call(agent))
                # The liveness ping, then the half-open probe after 2 s: each cut, each
                # followed by a connection and its lists made again.
                while moody.seen.count("ping") < 2 or moody.seen.count("tools/list") < 3:
                    await trio.sleep(0.05)
                row = await wait_state(agent, "m", "open", "degraded")
                while row["restarts"] < 2:
                    row = await wait_state(agent, "m", "open", "degraded")
                assert row["state"] == "open", row
                # The probe's failure doubled the cooldown, and the wait holds.
                assert 2 <= waits(await call(agent)) <= 4
                assert moody.seen.count("tools/call") == 1
    assert not [line for line in said.lines if "available again" in line], said.lines
