"""Lines begun and not ended on the agent socket, through a running daemon: past what
all connections may hold of them, the connections holding the oldest are closed to
make room, each told why, and the log names its agent; a line not ended in time
closes its connection the same way; other agents are served throughout, and a large
line sent at once passes."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.agents.entry import unfinished
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.system.procs import scripted

LINE = 256 * 1024  # max_line_bytes in these tests
HALF = 200 * 1024  # what each stalling agent sends of a line
AGENT = f"agent (pid {os.getpid()}, uid {os.getuid()})"


def config(tmp_path: Path, profiles: dict[str, Any] | None = None, **daemon: Any) -> Any:
    command, args = scripted()
    return make_config(
        tmp_path,
        {"s": {"command": command, "args": list(args)}},
        profiles=profiles,
        state_dir=str(tmp_path / "state"),
        audit_journal=False,
        **daemon,
    )


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def half_line(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":99,"method":"ping","params":{"pad":"'
    return head + b"x" * (size - len(head))


def closed_for(agent: Agent) -> str:
    """The reason the daemon gave as it closed ``agent``'s connection."""
    [error] = agent.unmatched
    assert error["id"] is None and error["error"]["code"] == -32000
    message: str = error["error"]["message"]
    assert message.startswith("mcpd: closing this connection in the middle of a line: ")
    return message


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcpd.agents"]


async def test_lines_held_past_what_all_may_hold_close_the_connections_that_held_longest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With lines of 256 KiB, all may hold four of them and mcpd's own user one more:
    1.25 MiB past each connection's 64 KiB; each stalling agent takes 136 KiB of it, so
    nine fit, and each one after them makes room by closing the oldest."""
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    monkeypatch.setattr(unfinished, "UNFINISHED_BUDGET", 0)  # four lines, then
    limits = unfinished.unfinished_limits(config(tmp_path, max_line_bytes=LINE).daemon)
    room = limits.most + limits.reserve
    fit = room // (HALF - unfinished.UNWEIGHED)
    assert fit == 9
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, max_line_bytes=LINE)) as daemon,
            connect(daemon.socket_path) as honest,
            trio.open_nursery() as nursery,
        ):
            stallers = []
            for _ in range(fit + 3):
                agent = Agent(await trio.open_unix_socket(daemon.socket_path))
                nursery.start_soon(agent.reader)
                stallers.append(agent)
                assert "result" in await agent.rpc("ping")
                await agent.send_raw(half_line(HALF))
                # Every byte sent is read before the next agent sends.
                await trio.testing.wait_all_tasks_blocked(0.05)
            for agent in stallers[:3]:
                await agent.closed.wait()
                assert f"(the {limits.most} bytes all together may hold)" in closed_for(agent)
                assert "was among the oldest" in closed_for(agent)
            assert not any(agent.closed.is_set() or agent.unmatched for agent in stallers[3:])
            # Whole lines hold nothing: an agent's calls are served as ever.
            assert text(await honest.call("mcp__s__tool0", {"text": "x"})) == "tool0:x"
            for agent in stallers:
                await agent.stream.aclose()
            nursery.cancel_scope.cancel()
    said = [m for m in logged(caplog) if "in the middle of a line" in m]
    assert len(said) == 3 and all(m.startswith(AGENT) for m in said), said


async def test_agents_that_hold_all_there_is_renewed_are_closed_for_a_line_sent_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Stalling agents of mcpd's own user hold nearly all that all may hold, the
    reserve too, and keep it held with fresh connections; an agent's large call,
    written at once, goes through every time, and the stalling ones are closed, the
    oldest first, each told why and named in the journal."""
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    monkeypatch.setattr(unfinished, "UNFINISHED_BUDGET", 0)
    fit = 9  # as above
    rounds = 4
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, max_line_bytes=LINE)) as daemon,
            connect(daemon.socket_path) as honest,
            trio.open_nursery() as nursery,
        ):
            assert "result" in await honest.rpc("ping")
            hogs: list[Agent] = []

            async def hog() -> None:
                agent = Agent(await trio.open_unix_socket(daemon.socket_path))
                nursery.start_soon(agent.reader)
                hogs.append(agent)
                assert "result" in await agent.rpc("ping")
                await agent.send_raw(half_line(HALF))
                await trio.testing.wait_all_tasks_blocked(0.05)

            for _ in range(fit):
                await hog()
            big = "y" * (LINE - 1024)
            closed: list[Agent] = []
            for _ in range(rounds):
                while len(hogs) - len(closed) < fit:
                    await hog()  # renewed, the oldest making room for the fresh
                reply = await honest.call("mcp__s__tool0", {"text": big})
                assert not reply.get("isError") and text(reply).startswith("tool0:yyyy")
                await trio.testing.wait_all_tasks_blocked(0.05)
                # The call made room by closing the oldest, as the fresh lines did.
                before, closed = closed, [agent for agent in hogs if agent.closed.is_set()]
                assert len(closed) > len(before) and closed == hogs[: len(closed)]
                assert all("was among the oldest" in closed_for(agent) for agent in closed)
            assert not honest.closed.is_set() and not honest.unmatched
            for agent in hogs:
                await agent.stream.aclose()
            nursery.cancel_scope.cancel()
    said = [m for m in logged(caplog) if "in the middle of a line" in m]
    assert len(said) == len(closed) and all(m.startswith(AGENT) for m in said), said
    assert all("was among the oldest" in m for m in said)


async def test_on_a_profiles_socket_lines_leave_the_operators_reserve_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents of mcpd's own user on a profile's socket hold what all may hold at most,
    as their connections do: the more kept for the operator is left for a line on the
    daemon's own socket, which fits with none of theirs closed."""
    monkeypatch.setattr(unfinished, "UNFINISHED_BUDGET", 0)
    sock = tmp_path / "narrow.sock"
    narrow = {"narrow": {"servers": ["s"], "socket": str(sock)}}
    cfg = config(tmp_path, max_line_bytes=LINE, profiles=narrow)
    limits = unfinished.unfinished_limits(cfg.daemon)
    fit = limits.most // (HALF - unfinished.UNWEIGHED)
    assert fit == 7
    with trio.fail_after(60):
        async with running(cfg) as daemon, trio.open_nursery() as nursery:
            stallers = []
            for _ in range(fit + 1):
                agent = Agent(await trio.open_unix_socket(str(sock)))
                nursery.start_soon(agent.reader)
                stallers.append(agent)
                assert "result" in await agent.rpc("ping")
                await agent.send_raw(half_line(HALF))
                await trio.testing.wait_all_tasks_blocked(0.05)
            # Past what all may hold, the oldest of them made room.
            await stallers[0].closed.wait()
            assert "was among the oldest" in closed_for(stallers[0])
            async with connect(daemon.socket_path) as operator:
                assert "result" in await operator.rpc("ping")
                await operator.send_raw(half_line(HALF))
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert not operator.closed.is_set() and not operator.unmatched
            assert not any(agent.closed.is_set() for agent in stallers[1:])
            for agent in stallers:
                await agent.stream.aclose()
            nursery.cancel_scope.cancel()


async def test_a_line_not_ended_in_time_closes_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    monkeypatch.setattr(unfinished, "LINE_TIMEOUT", 0.5)
    with trio.fail_after(30):
        async with (
            running(config(tmp_path)) as daemon,
            connect(daemon.socket_path) as idle,
            connect(daemon.socket_path) as staller,
        ):
            assert "result" in await idle.rpc("ping")
            assert "result" in await staller.rpc("ping")
            begun = b'{"jsonrpc":"2.0","id":2,"method":"pi'
            await staller.send_raw(begun)
            await staller.closed.wait()
            said = f"did not end it within 0.5 s ({len(begun)} bytes of it had come)"
            assert said in closed_for(staller)
            # An agent idle between lines is not: only a line has a time to end in.
            assert "result" in await idle.rpc("ping")
            assert not idle.closed.is_set()
    said = [m for m in logged(caplog) if "in the middle of a line" in m]
    assert len(said) == 1 and said[0].startswith(AGENT) and "within 0.5 s" in said[0]


async def test_a_large_line_sent_at_once_passes(tmp_path: Path) -> None:
    """Ten MiB of arguments in one write, by the default bounds, while two other agents
    each hold most of a large line."""
    with trio.fail_after(60):
        async with (
            running(config(tmp_path)) as daemon,
            connect(daemon.socket_path) as one,
            connect(daemon.socket_path) as two,
            connect(daemon.socket_path) as agent,
        ):
            for staller in (one, two):
                assert "result" in await staller.rpc("ping")
                await staller.send_raw(half_line(8 * 1024 * 1024))
            big = "y" * (10 * 1024 * 1024)
            reply = await agent.call("mcp__s__tool0", {"text": big})
            # The server had all of it (its result is cut to the text budget on the way back).
            assert not reply.get("isError") and text(reply).startswith("tool0:yyyy")
            assert not (one.closed.is_set() or two.closed.is_set())
