"""A call's own verbs (its answer, more time, cancelling) reach the scheduler that
admitted it and nothing before that; each tool's time limit is the one its config
sets, and a call that ran out of it names the key that set it."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec import Raw

from mcpd.config.loading.load import parse_config
from mcpd.servers.calling.calls import Admitter, Call, CallLimits, CallRefused
from mcpd.servers.status.outage import Outage
from tests.support.parts.calls import a_call


class Told(Admitter):
    """A scheduler that only keeps what its calls tell it."""

    def __init__(self) -> None:
        self.heard: list[tuple[Any, ...]] = []

    def cancel(self, call: Call) -> None:
        self.heard.append(("cancel", call))

    def extend(self, call: Call, seconds: float) -> None:
        self.heard.append(("extend", call, seconds))

    def received(self, call: Call, raw: Raw | None, error: BaseException | None) -> None:
        self.heard.append(("received", call, raw, error))


def limits(server: dict[str, Any], daemon: dict[str, Any] | None = None) -> CallLimits:
    config = parse_config(
        {"daemon": daemon or {}, "servers": {"s": {"command": "x", **server}}}, env={}
    )
    return CallLimits("s", config)


def test_a_call_not_yet_admitted_ignores_answers_time_and_cancelling() -> None:
    call, outcomes = a_call("t")
    call(Raw(b"{}"), None)
    call.extend(10.0)
    call.cancel()
    assert call.state == "new"
    assert not outcomes.arrived.is_set()


def test_a_call_tells_the_scheduler_that_admitted_it() -> None:
    call, _ = a_call("t")
    told = Told()
    call.scheduler = told
    answer = Raw(b'{"content":[]}')
    failure = RuntimeError("gone")
    call(answer, None)
    call(None, failure)
    call.extend(2.5)
    call.cancel()
    assert told.heard == [
        ("received", call, answer, None),
        ("received", call, None, failure),
        ("extend", call, 2.5),
        ("cancel", call),
    ]


def test_a_refused_call_says_why() -> None:
    outage = Outage("s", "stopped", "the server is not running")
    refused = CallRefused(outage)
    assert refused.outage is outage
    assert str(refused) == "the server is not running"


def test_a_tools_own_limit_wins_over_the_servers_and_the_daemons() -> None:
    lim = limits(
        {"call_timeout": 20, "tool_timeouts": {"slow": 300}},
        {"call_timeout": 10, "max_call_time": 900},
    )
    assert lim.timeout("slow") == 300
    assert lim.timeout("fast") == 20
    assert lim.source("slow", 300) == "servers.s.tool_timeouts"
    assert lim.source("fast", 20) == "servers.s.call_timeout"
    assert lim.max_call_time == 900


def test_without_a_server_limit_the_daemons_applies_and_is_named() -> None:
    lim = limits({}, {"call_timeout": 45})
    assert lim.timeout("any") == 45
    assert lim.source("any", 45) == "daemon.call_timeout"


@pytest.mark.parametrize("timeout", [5.0, 299.0, 0.0])
def test_a_limit_the_config_did_not_set_names_no_key(timeout: float) -> None:
    # The caller's own limit (a task's, a probe's): raising a config key would not help.
    lim = limits({"tool_timeouts": {"slow": 300}})
    assert lim.source("slow", timeout) is None


def test_a_tool_named_like_a_config_key_gets_no_limit_of_its_own() -> None:
    lim = limits({"call_timeout": 20, "tool_timeouts": {"slow": 300}})
    for name in ("", "SLOW", "slow ", "__class__", "tool_timeouts"):
        assert lim.timeout(name) == 20
