"""Progress reports routed from a server back to the agent whose call asked for them:
each call's own token for the server, the agent's token restored on the way back,
the call given more time, and reports for tokens the server was never given (or no
longer holds, or cannot even name) dropped."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from msgspec import Raw

from mcpd.servers.asking.askback import Asker
from mcpd.servers.asking.progress import MESSAGE_CHARS, ProgressRoutes
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


class Call:
    """An agent's call in flight, counting the time it was given."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.asker: Asker | None = None
        self.timeout = timeout
        self.asking = 0
        self.extended: list[float] = []

    def extend(self, seconds: float) -> None:
        self.extended.append(seconds)


class Agent:
    def __init__(self) -> None:
        self.got: list[mcp.ProgressParams] = []

    def __call__(self, params: mcp.ProgressParams) -> None:
        self.got.append(params)


def report(token: Any, progress: Any = 1, **more: Any) -> rpc.Notification:
    params = {"progressToken": token, "progress": progress, **more}
    return rpc.Notification("notifications/progress", Raw(json.dumps(params).encode()))


def test_each_call_gets_a_token_of_its_own_and_its_agent_gets_its_reports() -> None:
    routes = ProgressRoutes("mcpd-s-")
    first, second = Agent(), Agent()
    call_a, call_b = Call(), Call()
    # Two agents chose the same token: the server is given two different ones.
    token_a = routes.open("t", first, call_a)
    token_b = routes.open("t", second, call_b)
    assert token_a != token_b
    assert token_a.startswith("mcpd-s-") and token_b.startswith("mcpd-s-")

    assert routes.handle(report(token_b, 3, total=10, message="b half"))
    assert routes.handle(report(token_a, 0.5))
    assert first.got == [mcp.ProgressParams(progressToken="t", progress=0.5)]
    assert second.got == [
        mcp.ProgressParams(progressToken="t", progress=3, total=10, message="b half")
    ]


def test_the_agents_token_comes_back_as_it_gave_it() -> None:
    routes = ProgressRoutes("mcpd-s-")
    agent = Agent()
    token = routes.open(7, agent, Call())
    assert routes.handle(report(token, 3))
    (got,) = agent.got
    assert got.progressToken == 7 and type(got.progressToken) is int
    assert got.progress == 3 and type(got.progress) is int


def test_each_report_gives_its_call_its_time_again() -> None:
    routes = ProgressRoutes("mcpd-s-")
    call, other = Call(timeout=12.5), Call()
    token = routes.open("t", Agent(), call)
    routes.open("u", Agent(), other)
    for n in range(3):
        assert routes.handle(report(token, n))
    assert call.extended == [12.5, 12.5, 12.5]
    assert other.extended == []


@pytest.mark.parametrize(
    "token",
    ["mcpd-s-2", "mcpd-other-1", "t", 1, "", "mcpd-s-1 ", "MCPD-S-1"],
    ids=[
        "the next one",
        "another server's",
        "the agent's own",
        "a number",
        "empty",
        "padded",
        "other case",
    ],
)
def test_a_report_for_a_token_the_server_was_never_given_is_dropped(token: Any) -> None:
    routes = ProgressRoutes("mcpd-s-")
    agent, call = Agent(), Call()
    assert routes.open("t", agent, call) == "mcpd-s-1"
    assert not routes.handle(report(token))
    assert agent.got == [] and call.extended == []


def test_two_servers_tokens_never_meet() -> None:
    a, b = ProgressRoutes("mcpd-a-"), ProgressRoutes("mcpd-b-")
    agent = Agent()
    token_b = b.open("t", agent, Call())
    a.open("t", Agent(), Call())
    assert not a.handle(report(token_b))
    assert agent.got == []


def test_a_closed_call_gets_no_more_reports() -> None:
    routes = ProgressRoutes("mcpd-s-")
    agent, call = Agent(), Call()
    token = routes.open("t", agent, call)
    assert routes.handle(report(token, 1))
    routes.close(token)
    routes.close(token)  # twice, and one never opened, are harmless
    routes.close("mcpd-s-99")
    assert not routes.handle(report(token, 2))
    assert [p.progress for p in agent.got] == [1]
    assert call.extended == [30.0]
    # A new call never reuses the token of one that ended.
    assert routes.open("t", agent, call) != token


@pytest.mark.parametrize(
    "params",
    [
        None,
        b"[]",
        b'"mcpd-s-1"',
        b'{"progress": 1}',
        b'{"progressToken": "mcpd-s-1"}',
        b'{"progressToken": true, "progress": 1}',
        b'{"progressToken": 1.0, "progress": 1}',
        b'{"progressToken": "mcpd-s-1", "progress": "half"}',
        b'{"progressToken": "mcpd-s-1", "progress": 1e999}',
        b'{"progressToken": "mcpd-s-1", "progress": 1, "total": "all"}',
        b'{"progressToken": "mcpd-s-1", "progress": 1, "message": 5}',
        b'{"progressToken": "mcpd-s-1", "progress": 1',
    ],
)
def test_a_report_that_is_not_one_is_dropped(params: bytes | None) -> None:
    routes = ProgressRoutes("mcpd-s-")
    agent, call = Agent(), Call()
    routes.open("t", agent, call)
    msg = rpc.Notification("notifications/progress", None if params is None else Raw(params))
    assert not routes.handle(msg)
    assert agent.got == [] and call.extended == []


def test_what_else_the_server_puts_in_a_report_is_not_passed_on() -> None:
    routes = ProgressRoutes("mcpd-s-")
    agent = Agent()
    token = routes.open("t", agent, Call())
    assert routes.handle(report(token, 1, requestId=5, progressToken2="x"))
    assert agent.got == [mcp.ProgressParams(progressToken="t", progress=1)]


def test_a_report_that_does_not_go_up_is_not_passed_on_but_gives_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    routes = ProgressRoutes("mcpd-s-", alias="ev")
    agent, call = Agent(), Call()
    token = routes.open("t", agent, call)
    with caplog.at_level(logging.INFO, logger="mcpd.calls"):
        for progress in (5, 4, 5, 5.5, 1e308, 1e308):
            assert routes.handle(report(token, progress))
    assert [p.progress for p in agent.got] == [5, 5.5, 1e308]
    # A server repeating one value as a heartbeat is still working on the call.
    assert len(call.extended) == 6
    # The journal says so once for the call, not once per report.
    told = [r for r in caplog.records if "not greater than the last" in r.getMessage()]
    assert len(told) == 1 and told[0].getMessage().startswith("ev: ")
    # A token opened again starts over: its first report goes on, whatever it says, and
    # the journal is told again of its own reports.
    routes.close(token)
    again = routes.open("t", agent, call)
    with caplog.at_level(logging.INFO, logger="mcpd.calls"):
        assert routes.handle(report(again, 0))
        assert routes.handle(report(again, 0))
    assert agent.got[-1].progress == 0 and len(agent.got) == 4
    told = [r for r in caplog.records if "not greater than the last" in r.getMessage()]
    assert len(told) == 2


def test_a_long_message_is_cut_with_a_note_after_the_servers_mark() -> None:
    routes = ProgressRoutes("mcpd-s-", alias="ev")
    agent = Agent()
    token = routes.open("t", agent, Call())
    long = "[x]" + "y" * (MESSAGE_CHARS + 497)
    assert routes.handle(report(token, 1, message=long))
    (got,) = agent.got
    assert got.message == f"[ev] {long[:MESSAGE_CHARS]} [mcpd: 500 more characters were cut here]"
