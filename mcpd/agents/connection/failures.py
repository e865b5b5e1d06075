"""A request whose handling raised what nothing on its way expected: a fault in mcpd.

It costs that request alone. The agent is answered with an internal error that names
the exception's type (never its text, which may hold what the agent must not see), a
notification is dropped, and the fault is logged with its traceback; the connection
and every other agent are served on. Only ``Exception`` is taken here: a cancellation,
KeyboardInterrupt or SystemExit goes on up, as structured concurrency needs.

An agent that can make mcpd fail at will could fill the log with tracebacks: the
records are let through a ``Throttle``, and the next one let through counts those
held back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

logger = logging.getLogger("mcpd.agents")


def kind_of(exc: BaseException) -> str:
    """The type the agent is told of: a group's own exception when it holds just one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return type(exc).__name__


def failure_message(exc: BaseException) -> str:
    return (
        f"Internal error: mcpd failed on this request ({kind_of(exc)}); "
        "this is a fault in mcpd and was logged"
    )


class Failures:
    """The faults of one daemon's agent side, logged through one throttle."""

    def __init__(self) -> None:
        self._throttle = Throttle()

    def log(self, label: str, what: str, exc: BaseException, answered: bool) -> None:
        """``what``: the method (or kind of message) whose handling raised ``exc``."""
        held = self._throttle.admit()
        if held is None:
            return
        logger.error(
            "mcpd failed on %s's %s (%s); %s%s",
            label,
            what,
            kind_of(exc),
            "answered with an internal error" if answered else "dropped",
            f" ({held} more such failures since the last such line)" if held else "",
            exc_info=exc,
            extra=log_extra(None, "request_failed", f"mcpd failed: {kind_of(exc)}"),
        )

    def reply(self, label: str, rid: rpc.Id | None, what: str, exc: BaseException) -> bytes:
        """The error that answers the request ``rid``, its failure logged."""
        self.log(label, what, exc, answered=True)
        return rpc.encode_error(rid, rpc.INTERNAL_ERROR, failure_message(exc))

    def of_task(
        self,
        label: str,
        rid: rpc.Id,
        what: str,
        exc: BaseException,
        scope: trio.CancelScope,
        answer: Callable[[bytes], None],
    ) -> None:
        """A request's task (in ``scope``) ended with ``exc``: its ``Exception`` part
        is logged and, unless the agent cancelled the request, goes to ``answer`` as
        the error; the rest (a cancellation from outside) is raised again."""
        failed, rest = split_failure(exc)
        if failed is not None:
            if scope.cancel_called:  # a request cancelled gets no answer
                self.log(label, what, failed, answered=False)
            else:
                answer(self.reply(label, rid, what, failed))
        if rest is not None:
            raise rest

    def of_line(
        self, label: str, line: bytes, exc: BaseException
    ) -> tuple[bytes, rpc.Id | None] | None:
        """A line whose handling raised: the error that answers its request, and the
        request's id; None for what answers nothing (a notification, an answer to a
        server), which is dropped. The line is read again here, where it costs only
        what failed."""
        try:
            msg: rpc.Message | None = envelope.decode_message(line)
        except Exception:
            msg = None  # a batch, or what the fault was in: its id is not known
        if isinstance(msg, rpc.Request):
            return self.reply(label, msg.id, msg.method, exc), msg.id
        if msg is None:
            return self.reply(label, None, "message", exc), None
        what = msg.method if isinstance(msg, rpc.Notification) else "answer to a server"
        self.log(label, what, exc, answered=False)
        return None


def split_failure(
    exc: BaseException,
) -> tuple[BaseException | None, BaseException | None]:
    """``exc`` in two parts: the failure to answer with (its ``Exception`` part), and
    what must go on up (cancellations, KeyboardInterrupt, SystemExit); either may be None."""
    if isinstance(exc, Exception):
        return exc, None
    if isinstance(exc, BaseExceptionGroup):
        failed, rest = exc.split(Exception)
        return (None, exc) if failed is None else (failed, rest)
    return None, exc
