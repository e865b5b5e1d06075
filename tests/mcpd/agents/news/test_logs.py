"""Servers' log messages for agents: who gets which, named after which server, and
what level each server is asked for."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from mcpd.agents.news.logs import AgentLogs
from protocol.jsonrpc import messages as rpc
from protocol.mcp import server_logs
from protocol.mcp.server_logs import LogMessage


class FakeServers:
    def __init__(self) -> None:
        self.listener: Callable[[str, LogMessage], None] | None = None
        self.level_for: Callable[[str], str | None] = lambda alias: None

    def on_log_message(self, listener: Callable[[str, LogMessage], None]) -> None:
        self.listener = listener

    def want_logs(self, level_for: Callable[[str], str | None]) -> None:
        self.level_for = level_for

    def say(self, alias: str, level: str, data: Any, logger: str | None = None) -> None:
        assert self.listener is not None
        raw = msgspec.Raw(msgspec.json.encode(data))
        msg = (
            LogMessage(level=level, data=raw) if logger is None else LogMessage(level, raw, logger)
        )
        self.listener(alias, msg)


class Agent:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def send(self, line: bytes) -> None:
        self.lines.append(json.loads(line))

    def levels(self) -> list[str]:
        return [m["params"]["level"] for m in self.lines]


def test_each_agent_gets_its_level_and_worse_and_one_that_never_asked_gets_none() -> None:
    servers = FakeServers()
    logs = AgentLogs(servers)  # type: ignore[arg-type]
    verbose, severe, silent = Agent(), Agent(), Agent()
    logs.set_level(verbose, "debug", verbose.send, own_user=True)
    logs.set_level(severe, "error", severe.send, own_user=True)
    for level in server_logs.LEVELS:
        servers.say("notes", level, f"{level} happened")
    assert verbose.levels() == list(server_logs.LEVELS)
    assert severe.levels() == ["error", "critical", "alert", "emergency"]
    assert silent.lines == []
    assert servers.level_for("notes") == "debug"
    logs.owner_gone(verbose)
    assert servers.level_for("notes") == "error"
    logs.owner_gone(severe)
    assert servers.level_for("notes") is None


def test_the_logger_names_the_server_and_the_data_is_kept() -> None:
    servers = FakeServers()
    logs = AgentLogs(servers)  # type: ignore[arg-type]
    agent = Agent()
    logs.set_level(agent, "info", agent.send, own_user=True)
    servers.say("notes", "info", {"rows": [1, 2]})
    servers.say("notes", "warning", "disk low", logger="storage")
    assert [m["method"] for m in agent.lines] == ["notifications/message"] * 2
    assert [m["params"] for m in agent.lines] == [
        {"level": "info", "data": {"rows": [1, 2]}, "logger": "notes"},
        {"level": "warning", "data": "disk low", "logger": "notes/storage"},
    ]


def test_an_agent_does_not_hear_servers_its_profile_hides() -> None:
    servers = FakeServers()
    logs = AgentLogs(servers)  # type: ignore[arg-type]
    coder, everyone = Agent(), Agent()
    logs.set_level(coder, "debug", coder.send, lambda alias: alias == "git", own_user=True)
    logs.set_level(everyone, "warning", everyone.send, own_user=True)
    servers.say("git", "info", "fetched")
    servers.say("mail", "error", "smtp down")
    assert [m["params"]["logger"] for m in coder.lines] == ["git"]
    assert [m["params"]["logger"] for m in everyone.lines] == ["mail"]
    # A server is asked only for what the agents that see it want.
    assert servers.level_for("git") == "debug"
    assert servers.level_for("mail") == "warning"


def test_another_users_agent_is_sent_no_server_log_messages() -> None:
    servers = FakeServers()
    logs = AgentLogs(servers)  # type: ignore[arg-type]
    owner, other = Agent(), Agent()
    logs.set_level(owner, "info", owner.send, own_user=True)
    logs.set_level(other, "debug", other.send, own_user=False)
    servers.say("notes", "info", {"called with": {"token": "sk-1"}})
    servers.say("notes", "emergency", "down")
    assert owner.levels() == ["info", "emergency"]
    assert other.lines == [], "a shared server's log is what it did for everyone"


def test_another_users_level_is_not_what_a_server_is_asked_for() -> None:
    servers = FakeServers()
    logs = AgentLogs(servers)  # type: ignore[arg-type]
    owner, other = Agent(), Agent()
    logs.set_level(other, "debug", other.send, own_user=False)
    assert servers.level_for("notes") is None, "nobody who may read it wants it"
    logs.set_level(owner, "warning", owner.send, own_user=True)
    assert servers.level_for("notes") == "warning"
    logs.owner_gone(owner)
    assert servers.level_for("notes") is None


@pytest.mark.parametrize("params", [b'{"level":"loud"}', b'{"level":3}', b"{}", None])
def test_an_unknown_level_is_refused_naming_the_levels(params: bytes | None) -> None:
    with pytest.raises(rpc.RPCError) as caught:
        server_logs.checked_level(msgspec.Raw(params) if params is not None else None)
    assert caught.value.code == rpc.INVALID_PARAMS
    assert "debug, info, notice, warning, error, critical, alert, emergency" in (
        caught.value.message
    )


async def test_mcpds_own_log_keeps_each_message_at_its_servers_severity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from mcpd.servers.connected.log_messages import LogMessages

    logs = LogMessages("everything", lambda: None)
    with caplog.at_level(logging.DEBUG, logger="mcpd.server"):
        for level in ("error", "alert", "info"):
            params = json.dumps({"level": level, "data": f"{level}-level message"}).encode()
            logs.on_notification(rpc.Notification("notifications/message", msgspec.Raw(params)))
    seen = [(r.levelname, r.getMessage(), getattr(r, "mcpd_event", None)) for r in caplog.records]
    assert seen == [
        ("ERROR", "error-level message", "message"),
        ("CRITICAL", "alert-level message", "message"),
        ("INFO", "info-level message", "message"),
    ], "a server's log message is not its stderr, and its severity is kept"
