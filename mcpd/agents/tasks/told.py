"""What a server tells of a task, read before any of it reaches an agent.

A server tells of a task in its handle (a ``tools/call`` answered with
``resultType: "task"``), in its answers to ``tasks/get``, ``tasks/update`` and
``tasks/cancel``, and in ``notifications/tasks``. Each is read here first as a task
(``TaskState``): its ``status`` and ``statusMessage`` are strings where present, or
the whole of what it said is the server's malformed reply, refused naming the server
(a status mcpd cannot read cannot tell it whether the task ended either). The tasks
extension may name statuses of its own in later versions, so any string is a status;
the ones mcpd acts on are ``features.TASK_ENDED``.

The status message is the server's words for a person, passed on cut to
``STATUS_SHOWN`` characters with the note of the cut every cut of a server's words
has. The result the task ended with is shaped for the agent as a tools/call's is
(``table.Tasks.shown``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from protocol.shown.logfields import log_extra
from protocol.shown.visible import cut

from ...registry.uris.scheme import Sight
from ...servers.shared import AgentKey, Outage, SessionMark

# A status message says in a line or two how the task is going: more is the server
# filling the agent's context, which the result budget is there to bound.
STATUS_SHOWN: Final = 1000  # characters
logger = logging.getLogger("mcpd.tasks")


class TaskState(msgspec.Struct):
    """The members of a server's word of a task that mcpd reads; the rest passes on as
    the server wrote it."""

    status: str | UnsetType = UNSET
    statusMessage: str | UnsetType = UNSET


def task_state(told: dict[str, object]) -> TaskState | str:
    """What ``told`` (a server's word of a task, decoded) says of the task, or what
    makes it unreadable."""
    try:
        return msgspec.convert(told, TaskState)
    except msgspec.ValidationError as exc:
        return f"its task is malformed: {exc}"


def cut_message(told: dict[str, object], state: TaskState) -> None:
    """``told``'s status message, cut to ``STATUS_SHOWN``."""
    if isinstance(state.statusMessage, str) and len(state.statusMessage) > STATUS_SHOWN:
        told["statusMessage"] = cut(state.statusMessage, STATUS_SHOWN)


def malformed(alias: str, what: str, reason: str) -> Outage:
    """Why ``what`` (a tools/call, a tasks/* request) failed: the server ``alias`` told
    of its task as mcpd cannot hand on, for ``reason``."""
    logger.warning(
        "%s: %s failed: %s", alias, what, reason, extra=log_extra(alias, "malformed_reply")
    )
    return Outage(alias, "malformed", reason)


def news_dropped(alias: str, reason: str) -> None:
    """A ``notifications/tasks`` of the server ``alias`` reaches no listen, for ``reason``."""
    logger.warning(
        "%s: a notifications/tasks was dropped: %s",
        alias,
        reason,
        extra=log_extra(alias, "malformed_reply"),
    )


class ResultFor(msgspec.Struct, frozen=True):
    """The agent a task's result goes to (``results.Recipient``): a modern one that
    takes tasks, whose capabilities are those of its request (or its listen)."""

    alias: str
    owner: AgentKey
    sight: Sight | None
    capabilities: dict[str, Any] | None
    session: SessionMark | None
    modern: bool = True
    tasks: bool = True
