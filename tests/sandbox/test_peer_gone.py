"""A process that connects and is gone before mcpd looks it up is refused: mcpd cannot
tell whose it was, so it is neither taken for the owner nor for an agent."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

import pytest
import trio

from tests.support.daemons.sandboxed import (
    agent_of,
    call,
    hostile,
    serving,
    steady,
    untouched,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def test_a_servers_process_cannot_pass_as_the_owner_through_an_exited_child(
    tmp_path: Path,
) -> None:
    servers = {"hostile": hostile(), "steady": steady(), "open": hostile(sandbox="off")}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            for alias in ("hostile", "open"):
                for _ in range(5):
                    got = await call(agent, alias, "ask_reload_orphaned", socket=d.socket)
                    # Refused in words, or closed before the request could be sent.
                    assert got.startswith(
                        ("refused: PermissionError", "refused: BrokenPipeError")
                    ), got
                    assert (
                        "BrokenPipeError" in got
                        or "has already exited" in got
                        or f"a process of the server '{alias}' may not use this socket" in got
                    ), got
            assert "mcpd/reload" not in d.log()
            await untouched(d, agent, before)


CLOSED = "mcpd closed the connection with no answer"


def _through_exited_child(path: str, method: str, params: dict[str, object]) -> dict[str, object]:
    """``method``'s answer on a connection made by a child that is reaped first (or, if
    mcpd is quicker, while it still runs)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        child = os.fork()
        if child == 0:
            try:
                s.connect(path)
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
        # mcpd may refuse the connection before the request goes: then read why.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(json.dumps(request).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            reply += data
    if not reply:
        return {"error": {"message": CLOSED}}
    answer: dict[str, object] = json.loads(reply)
    return answer


async def test_an_agent_cannot_decide_its_own_call_through_an_exited_child(
    tmp_path: Path,
) -> None:
    policy = '[[policy]]\ntools = ["*"]\nservers = ["steady"]\naction = "ask"\n'
    with serving(tmp_path, {"steady": steady()}, policy) as d:
        async with agent_of(d) as agent, trio.open_nursery() as nursery:
            await wait_ready(agent, "steady")
            nursery.start_soon(agent.call, "mcp__steady__tool0", {"text": "a"})
            with trio.fail_after(30):
                waiting: list[dict[str, object]] = []
                version = 0
                while not waiting:
                    seen = await agent.result("mcpd/approvals/watch", {"after": version})
                    waiting, version = seen["approvals"], seen["version"]
            (pending,) = waiting
            for _ in range(5):
                answer = await trio.to_thread.run_sync(
                    _through_exited_child,
                    d.socket,
                    "mcpd/approvals/decide",
                    {"id": pending["id"], "approve": True},
                )
                assert "result" not in answer, answer
                error = answer["error"]
                assert isinstance(error, dict)
                message = error["message"]
                # mcpd either saw the child gone, or saw it as the agent's own child.
                assert (
                    "the process that connected has already exited" in message
                    or "the agent that made this call (pid" in message
                    or message == CLOSED
                ), message
            assert (await agent.result("mcpd/approvals/list"))["approvals"] == waiting
            nursery.cancel_scope.cancel()
        assert "approved by" not in d.log()
