"""What a connected server's own task waits for: each answer within ``list_timeout``,
a request out of time said once while it goes unanswered and shown in ``mcpd status``;
then through a running daemon, a server that answers calls and probes but leaves its
tools/list unanswered: the tools it listed before stay, new ones are picked up once it
answers again, and once it answers nothing at all it is found out, its circuit opened
and its process started anew, calls refused at once meanwhile."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.servers.connected.answer_wait import AnswerWait, RanOut
from mcpd.servers.connected.handshake import BadPage
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.pins import heard
from tests.support.daemons.supervision import wait_restarted_on_trial, wait_state
from tests.support.parts.status_rows import status_text

SERVER = str(Path(__file__).parents[3] / "support" / "servers" / "list_hang.py")
UNANSWERED = "lh: tools/list got no answer within 1 s (the daemon's list_timeout)"


async def unanswered(wait: AnswerWait, method: str = "tools/list") -> None:
    ran_out = pytest.raises(RanOut, match=f"{method} got no answer within 2 s")
    with ran_out, wait.bounded(method, "asked again later"):
        await trio.sleep_forever()


async def test_an_answer_out_of_time_is_said_once_until_the_server_answers_again(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    wait = AnswerWait("s", lambda: 2.0)
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        began = trio.current_time()
        await unanswered(wait)
        assert trio.current_time() - began == 2.0
        await unanswered(wait)  # asked again, no answer again: the same episode
        late = wait.late
        assert late is not None and late.since == began + 2.0
        assert "tools/list got no answer within 2 s" in late.reason
        with wait.bounded("tools/list", "asked again later"):
            await trio.sleep(1.0)
        assert wait.late is None
        await unanswered(wait)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    warned = (
        "WARNING",
        "s: tools/list got no answer within 2 s (the daemon's list_timeout): asked again later",
    )
    assert said == [warned, ("INFO", "s: tools/list answered again"), warned]
    record = caplog.records[0]
    assert (record.mcpd_server, record.mcpd_event) == ("s", "unanswered")


async def test_a_refusal_is_an_answer_and_each_method_is_late_on_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    wait = AnswerWait("s", lambda: 2.0)
    await unanswered(wait, "prompts/list")
    await unanswered(wait, "resources/list")
    with pytest.raises(rpc.RPCError), wait.bounded("prompts/list", "asked again later"):
        raise rpc.RPCError(-32603, "no")
    late = wait.late
    assert late is not None and late.reason.startswith("resources/list")
    wait.reset()
    assert wait.late is None


async def test_a_failing_list_is_said_once_a_minute_a_reason_with_how_often_and_shown_until_listed(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    wait = AnswerWait("s", lambda: 2.0)
    began = trio.current_time()
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        for _ in range(3):  # failing every other time, once a second
            wait.failed("tools/list", rpc.RPCError(-32603, "busy"), "kept")
            await trio.sleep(1)
            wait.listed("tools/list")
            assert wait.trouble is None
            await trio.sleep(1)
        wait.failed("prompts/list", BadPage("s: bad prompts/list result: no"), "kept")
        await trio.sleep(60)
        wait.failed("tools/list", rpc.RPCError(-32603, "down"), "kept")
        await trio.sleep(5)
        wait.failed("tools/list", rpc.RPCError(-32603, "still down"), "kept")
    trouble = wait.trouble
    assert trouble is not None and trouble.since == began + 6
    assert trouble.reason == "prompts/list failed: bad prompts/list result: no; kept"
    wait.listed("prompts/list")
    trouble = wait.trouble
    assert trouble is not None and trouble.since == began + 66
    assert trouble.reason == 'tools/list failed: the error "still down"; kept'
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        ("WARNING", 's: tools/list failed: the error "busy"; kept'),
        ("INFO", "s: tools/list succeeded again"),
        ("WARNING", "s: prompts/list failed: bad prompts/list result: no; kept"),
        (
            "WARNING",
            "s: tools/list failed (failed 3 times since this was last said): the "
            'error "down"; kept',
        ),
        # A new reason, said at once: the journal's last word is the latest.
        ("WARNING", 's: tools/list failed: the error "still down"; kept'),
    ]
    assert caplog.records[0].mcpd_event == "list_failed"
    wait.reset()
    assert wait.trouble is None


# -- through a running daemon --


def hanging(tmp_path: Path, **daemon: Any) -> Any:
    servers = {"lh": {"command": sys.executable, "args": [SERVER, str(tmp_path / "reached")]}}
    return make_config(tmp_path, servers, list_timeout=1.0, **daemon)


class Said(logging.Handler):
    """Sets ``said`` once the journal says a tools/list of ``lh`` went unanswered."""

    def __init__(self) -> None:
        super().__init__()
        self.said = trio.Event()
        self.times = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(UNANSWERED):
            self.times += 1
            self.said.set()


async def names(agent: Agent) -> set[str]:
    return {t["name"] for t in await agent.tools()}


async def test_tools_listed_while_the_server_left_its_list_unanswered_are_picked_up_after(
    tmp_path: Path,
) -> None:
    journal = Said()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(60):
            async with (
                running(hanging(tmp_path)) as daemon,
                connect(daemon.socket_path) as agent,
            ):
                await agent.initialize()
                first = await names(agent)
                assert "mcp__lh__hang" in first and "mcp__lh__later" not in first
                await agent.call("mcp__lh__hang")
                await journal.said.wait()
                # What it listed before is served, and said why in its status row.
                assert await names(agent) == first
                shown = status_text(await agent.result("mcpd/status"))
                assert "held back|" in shown and "tools/list got no answer within 1 s" in shown
                echoed = await agent.call("mcp__lh__echo", {"text": "still"})
                assert echoed["content"] == [{"type": "text", "text": "echo:still"}]
                since = len(agent.notifications)
                await agent.call("mcp__lh__answer")
                await heard(agent, since, ("notifications/tools/list_changed",))
                assert await names(agent) == first | {"mcp__lh__later"}
                shown = status_text(await agent.result("mcpd/status"))
                assert "held back|" not in shown
        assert journal.times == 1
    finally:
        logger.removeHandler(journal)


async def test_a_server_that_leaves_its_list_unanswered_then_answers_nothing_is_found_out(
    tmp_path: Path,
) -> None:
    """Its list is asked for again (it announced a change) as it stops answering: its
    calls run out of time, the probe they ask for goes unanswered, its circuit opens
    and it is started anew, its circuit open until mcpd's probe after the cooldown is
    answered, then answering the call that decides whether it stays closed."""
    journal = Said()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    config = hanging(tmp_path, call_timeout=1.0, failure_threshold=1, cooldown_base=4.0)
    try:
        with trio.fail_after(60):
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await agent.initialize()
                await agent.call("mcp__lh__hang")
                frozen = await agent.call("mcp__lh__freeze")
                assert "did not answer this call in time" in frozen["content"][0]["text"]
                row = await wait_restarted_on_trial(agent, "lh")
                assert row["restarts"] >= 1
                answered = await agent.call("mcp__lh__echo", {"text": "x"})
                assert not answered.get("isError"), answered
                await wait_state(agent, "lh", "ready")
        assert journal.times == 1
    finally:
        logger.removeHandler(journal)
