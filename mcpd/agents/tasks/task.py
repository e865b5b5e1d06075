"""One task as mcpd keeps it for its agent (``table``), and the names it goes by."""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.mcp import core as mcp

from ...servers.shared import SessionMark
from ..agent import Sent


class Task:
    """A server's task, handed to one agent."""

    __slots__ = ("alias", "ended", "reachable", "sent", "server_id", "session", "size")

    def __init__(
        self,
        alias: str,
        server_id: str,
        session: SessionMark | None,
        size: int,
        sent: Sent | None,
    ) -> None:
        self.alias = alias
        self.server_id = server_id  # the id its server gave it
        self.session = session  # the session with its server it was made in
        self.size = size  # of the server's id, as it counts against MAX_TASK_BYTES
        # The tool and decision its call went to the server under (None: no rule was
        # asked, as for a call of mcpd's own).
        self.sent = sent
        # The result mcpd ended it with for its agent, refusing what would have made
        # the server go on with it (None: its server's to tell).
        self.ended: mcp.CallToolResult | None = None
        # Whether its server may still be asked about it (a cancel, after mcpd ended
        # it): not once its session ended or its agent's profile hid the server.
        self.reachable = True


# How a task is found: its server's alias and its id there. The agent's id for it is
# made of the same two strings as it is needed, so the server's id is held once.
TaskKey = tuple[str, str]


def task_key(task_id: str) -> TaskKey | None:
    """The key of the agent's id for a task (None: no task's id)."""
    alias, colon, server_id = task_id.partition(":")
    return (alias, server_id) if colon else None


def agent_task_id(alias: str, server_id: str) -> str:
    """The id an agent knows a server's task by: an alias holds no colon, so no two
    servers' tasks share one."""
    return f"{alias}:{server_id}"


def stop_holding(task: Task) -> None:
    """``task`` holds its server up no more: it ended, or no agent can read it."""
    if task.session is not None:
        task.session.holds.ended(task.server_id)


def ended_task(task_id: str, refusal: mcp.CallToolResult) -> dict[str, object]:
    """A task mcpd ended with ``refusal``, as ``tasks/get`` shows a task ended so."""
    result: dict[str, Any] = msgspec.to_builtins(refusal)
    result["resultType"] = mcp.COMPLETE
    return {"taskId": task_id, "status": "completed", "result": result}
