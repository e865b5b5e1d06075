"""One server's log messages: the level it is asked to send at, what reaches mcpd's
own log and what reaches agents, and what a server flooding or forging log lines
gets out of it."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from mcpd.local.service.journal import LineHandler
from mcpd.servers.connected.answer_wait import AnswerWait, RanOut
from mcpd.servers.connected.log_messages import BURST, QUIET, RATE, LogMessages
from mcpd.servers.connected.upstream import Upstream
from protocol.jsonrpc import messages as rpc
from protocol.mcp.greeting import ServerCapabilities
from protocol.mcp.server_logs import LogMessage
from tests.support.parts.stand_in import Never, StandIn


class LoggingServer(StandIn):
    def __init__(self, refuse: bool = False, silent: bool = False) -> None:
        super().__init__()
        self.levels: list[str] = []
        self.refuse = refuse
        self.silent = silent

    def answer(self, method: str, params: Any) -> Any:
        if method != "logging/setLevel":
            return super().answer(method, params)
        self.levels.append(params.level)
        if self.refuse:
            return rpc.RPCError(rpc.INVALID_PARAMS, "no such level here")
        if self.silent:
            return Never()
        return {}


def upstream(server: StandIn, era: str = "legacy", logging_offered: bool = True) -> Upstream:
    up = Upstream("notes", server)  # type: ignore[arg-type]
    up.era = era  # type: ignore[assignment]
    up.capabilities = ServerCapabilities(logging=logging_offered)
    return up


def note(level: str, data: object) -> rpc.Notification:
    params = json.dumps({"level": level, "data": data}).encode()
    return rpc.Notification("notifications/message", msgspec.Raw(params))


class Agents:
    def __init__(self) -> None:
        self.got: list[tuple[str, str, object]] = []

    def __call__(self, alias: str, message: LogMessage) -> None:
        self.got.append((alias, message.level, msgspec.json.decode(message.data)))


def listening(level: str | None) -> tuple[LogMessages, Agents]:
    logs = LogMessages("notes", lambda: None)
    agents = Agents()
    logs.on_message = agents
    logs.want(level)
    return logs, agents


def test_a_new_level_wakes_the_server_once() -> None:
    wakes: list[None] = []
    logs = LogMessages("notes", lambda: wakes.append(None))
    logs.want(None)
    assert wakes == [] and not logs.due
    logs.want("info")
    logs.want("info")
    assert len(wakes) == 1 and logs.due
    logs.want(None)
    assert len(wakes) == 2


async def test_a_legacy_server_is_told_each_new_level_and_quieted_when_nobody_listens() -> None:
    server = LoggingServer()
    up = upstream(server)
    logs = LogMessages("notes", lambda: None)
    await logs.tend(up)
    assert server.levels == []  # nobody ever asked: the server's own default stays
    logs.want("debug")
    await logs.tend(up)
    assert not logs.due
    await logs.tend(up)
    logs.want("error")
    await logs.tend(up)
    logs.want(None)
    await logs.tend(up)
    await logs.tend(up)
    assert server.levels == ["debug", "error", QUIET]


async def test_a_new_session_is_told_the_level_again() -> None:
    server = LoggingServer()
    logs = LogMessages("notes", lambda: None)
    logs.want("info")
    await logs.tend(upstream(server))
    logs.connected()
    assert logs.due
    await logs.tend(upstream(server))
    assert server.levels == ["info", "info"]
    # With nobody listening, a new session is left at its own default.
    logs.want(None)
    logs.connected()
    assert not logs.due
    await logs.tend(upstream(server))
    assert server.levels == ["info", "info"]


async def test_a_level_not_answered_in_time_is_sent_again_when_agents_want_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = LoggingServer(silent=True)
    logs = LogMessages("notes", lambda: None, answers=AnswerWait("notes", lambda: 2.0))
    logs.want("info")
    with pytest.raises(RanOut, match="logging/setLevel got no answer within 2 s"):
        await logs.tend(upstream(server))
    assert not logs.due
    server.silent = False
    logs.want("debug")
    await logs.tend(upstream(server))
    assert server.levels == ["info", "debug"]


async def test_a_server_that_offers_no_logging_is_never_asked() -> None:
    server = LoggingServer()
    logs = LogMessages("notes", lambda: None)
    logs.want("debug")
    await logs.tend(upstream(server, logging_offered=False))
    assert server.sent == []


async def test_a_modern_server_gets_the_level_with_each_request() -> None:
    server = LoggingServer()
    up = upstream(server, era="modern")
    logs = LogMessages("notes", lambda: None)
    logs.want("warning")
    await logs.tend(up)
    assert up.meta.log_level == "warning" and server.sent == []
    logs.want(None)
    await logs.tend(up)
    assert up.meta.log_level is None


async def test_a_level_the_server_refuses_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = LoggingServer(refuse=True)
    logs = LogMessages("notes", lambda: None)
    logs.want("debug")
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        await logs.tend(upstream(server))
    [record] = caplog.records
    # The server's words quoted in mcpd's line.
    assert record.getMessage() == 'notes: logging/setLevel debug refused: "no such level here"'
    assert record.mcpd_server == "notes"
    # Not asked again and again for the same level.
    await logs.tend(upstream(server))
    assert server.levels == ["debug"]


def test_what_is_no_log_message_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    logs, agents = listening("debug")
    bad = [
        rpc.Notification("notifications/message", None),
        rpc.Notification("notifications/message", msgspec.Raw(b"not json")),
        rpc.Notification("notifications/message", msgspec.Raw(b'{"level":"loud","data":1}')),
        rpc.Notification("notifications/message", msgspec.Raw(b'{"level":7,"data":1}')),
        rpc.Notification("notifications/message", msgspec.Raw(b'{"data":"x"}')),
        rpc.Notification(
            "notifications/message", msgspec.Raw(b'{"level":"info","data":' + b"[" * 100_000)
        ),
        rpc.Notification("notifications/progress", note("error", "x").params),
    ]
    with caplog.at_level(logging.DEBUG, logger="mcpd.server"):
        for msg in bad:
            logs.on_notification(msg)
    assert caplog.records == [] and agents.got == []


async def test_mcpds_log_gets_a_line_of_bounded_length_at_the_servers_severity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logs = LogMessages("notes", lambda: None)
    with caplog.at_level(logging.DEBUG, logger="mcpd.server"):
        logs.on_notification(note("emergency", "x" * 1_000_000))
        logs.on_notification(note("notice", {"rows": [1, 2]}))
        logs.on_notification(note("debug", None))
    big, obj, none = caplog.records
    assert big.levelno == logging.CRITICAL
    assert big.getMessage() == "x" * 500 + "\u2026 (and 999500 more characters)"
    assert (obj.levelno, obj.getMessage()) == (logging.INFO, '{"rows":[1,2]}')
    assert (none.levelno, none.getMessage()) == (logging.DEBUG, "null")
    assert all((r.mcpd_server, r.mcpd_event) == ("notes", "message") for r in caplog.records)


async def test_a_message_cannot_forge_a_line_of_mcpds_log(caplog: pytest.LogCaptureFixture) -> None:
    forged = "ok\n2026-01-01 00:00:00.000 ERROR    [bank] outage: \x1b[31mdown\r\x1b[2K"
    logs = LogMessages("notes", lambda: None)
    with caplog.at_level(logging.DEBUG, logger="mcpd.server"):
        logs.on_notification(note("error", forged))
    [record] = caplog.records
    out = io.StringIO()
    LineHandler(out).write(record)
    lines = out.getvalue().splitlines()
    assert "[notes] message: ok" in lines[0]
    assert all(line.startswith("    | ") for line in lines[1:])
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


async def test_agents_get_messages_at_the_level_they_want_or_worse() -> None:
    logs, agents = listening("warning")
    for level in ("debug", "info", "notice", "warning", "error", "emergency"):
        logs.on_notification(note(level, level))
    assert [level for _, level, _ in agents.got] == ["warning", "error", "emergency"]
    assert all(alias == "notes" for alias, _, _ in agents.got)


async def test_nobody_listening_gets_nothing() -> None:
    logs, agents = listening(None)
    logs.on_notification(note("emergency", "x"))
    assert agents.got == []
    logs = LogMessages("notes", lambda: None)
    logs.want("debug")  # wanted, but nobody to hand it to
    logs.on_notification(note("error", "x"))


async def test_a_flood_reaches_agents_as_a_burst_then_a_rate_with_a_count_of_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    logs, agents = listening("info")
    flood = 10 * BURST
    for i in range(flood):
        logs.on_notification(note("info", i))
    assert [data for _, _, data in agents.got] == list(range(BURST))
    await trio.sleep(1.0)
    logs.on_notification(note("info", "after"))
    held = flood - BURST
    _, level, text = agents.got[BURST]
    assert level == "warning"
    assert text == f"mcpd held back {held} log messages from this server (too many at once)"
    assert agents.got[BURST + 1][2] == "after"
    # Then about RATE a second, never the whole burst again at once.
    agents.got.clear()
    for i in range(flood):
        logs.on_notification(note("info", i))
    assert len(agents.got) <= RATE + 1


async def test_messages_below_the_level_wanted_do_not_use_up_the_budget() -> None:
    logs, agents = listening("error")
    for _ in range(10 * BURST):
        logs.on_notification(note("debug", "chatter"))
    logs.on_notification(note("error", "it matters"))
    assert [data for _, _, data in agents.got] == ["it matters"]


async def test_a_flood_reaches_mcpds_log_as_a_burst_then_a_count_of_the_rest(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    # What the budget drops makes no record at all (nothing is built, or searched for
    # secrets, only to be thrown away by the handler).
    logs = LogMessages("notes", lambda: None)
    flood = 10 * BURST
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        for i in range(flood):
            logs.on_notification(note("info", i))
        made = [r.getMessage() for r in caplog.records]
        await trio.sleep(1.0)
        logs.on_notification(note("info", "after"))
    assert made == [str(i) for i in range(BURST)]
    summary, after = caplog.records[BURST:]
    held = flood - BURST
    assert summary.getMessage() == f"{held} log messages from notes held back (too many at once)"
    assert (summary.levelno, summary.mcpd_event, summary.mcpd_suppressed) == (
        logging.WARNING,
        "message",
        held,
    )
    assert after.getMessage() == "after"


async def test_messages_below_mcpds_log_level_do_not_use_up_its_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logs = LogMessages("notes", lambda: None)
    with caplog.at_level(logging.WARNING, logger="mcpd.server"):
        for _ in range(10 * BURST):
            logs.on_notification(note("debug", "chatter"))
        logs.on_notification(note("error", "it matters"))
    assert [r.getMessage() for r in caplog.records] == ["it matters"]
