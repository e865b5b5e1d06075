"""Lazy stdio servers in a daemon's config, and what tests read of them: whether the
process is gone, the server's state in ``mcpd/status``, a result's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.system.procs import read_pid, scripted, wait_gone


def lazy(pid_file: Path, *flags: str, idle_stop: float = 0.5) -> dict[str, Any]:
    command, args = scripted("--pid-file", str(pid_file), *flags)
    return {"command": command, "args": list(args), "start": "lazy", "idle_stop": idle_stop}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


async def stopped(pid_file: Path) -> bool:
    """Whether the process that wrote ``pid_file`` is gone (or goes within a while)."""
    try:
        pid = await read_pid(pid_file)
    except ProcessLookupError:
        return True  # gone with its sandbox before it could be looked up
    return await wait_gone(pid)


async def state_of(agent: Any, alias: str) -> str:
    status = await agent.result("mcpd/status")
    return next(s["state"] for s in status["servers"] if s["alias"] == alias)  # type: ignore[no-any-return]
