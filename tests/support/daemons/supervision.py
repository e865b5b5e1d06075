"""Servers for supervision tests, and waiting on a server's state through the socket."""

from __future__ import annotations

import socket
from typing import Any

import trio

from tests.support.clients.agent import Agent
from tests.support.system.procs import scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


async def wait_state(agent: Agent, alias: str, *states: str) -> dict[str, Any]:
    while True:
        status = await agent.result("mcpd/status")
        for s in status["servers"]:
            if s["alias"] == alias and s["state"] in states:
                return s  # type: ignore[no-any-return]
        await trio.sleep(0.05)


async def wait_restarted_on_trial(agent: Agent, alias: str) -> dict[str, Any]:
    """The server's status once its circuit opened, it runs again and was probed: a
    server that answers nothing, mcpd's probe neither, opens its circuit as that probe
    ends its session; started anew, it answers its connection and lists, yet it was
    reached and failed, so the circuit stays ``open`` until its cooldown ends; mcpd's
    probe is answered then, the circuit closes on trial (``degraded``) and the next
    call decides."""
    while True:
        row = await wait_state(agent, alias, "open")
        if row["restarts"]:
            break
        await trio.sleep(0.05)
    while True:
        row = await wait_state(agent, alias, "degraded")
        if row["breaker"]["opened"]:
            return row
        await trio.sleep(0.05)
