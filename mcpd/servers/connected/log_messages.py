"""One server's log messages (``notifications/message``): into mcpd's own log, out to
the agents that asked for them, and the level the server is asked to send at.

Both ways a server's messages are held to a budget (a burst, then a rate), and what
was held back is counted and said once messages go through again. The log's budget
is spent before a record is made of a message, so that a flood costs a count each.

The level asked for is the most verbose any agent wants. A legacy server that offers
``logging`` hears it by ``logging/setLevel``, again whenever it changes and after each
reconnect; once no agent wants its messages any more it is set back to ``warning``
(the handshake protocol has no "off"), so mcpd's log still gets what matters. A
modern server has no session to set: the level goes in the ``_meta`` of each request.

What reaches agents is cleaned as a server's error texts are (``registry.text.clean``):
every string of its data, and the logger it names, within the budget, so a flood
costs no cleaning; then searched for secrets again, as the cleaning could join one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import server_logs
from protocol.mcp.server_logs import LogMessage
from protocol.pacing.buckets import Bucket, Throttle
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ...local.service.ratelimit import SUMMARY_EVERY
from ...policy.redaction.guard import SecretGuard
from ...policy.redaction.masking import KnownSecrets
from ...registry.text.clean import clean_data, clean_text
from .answer_wait import AnswerWait
from .upstream import Upstream

logger = logging.getLogger("mcpd.server")

Heard = Callable[[str, LogMessage], None]  # (alias, the message as the server sent it)
# What a legacy server is left at when no agent wants its messages any more.
QUIET: Final = "warning"
# A server's messages to agents, and to mcpd's log (the share its stderr has there
# too): this many at once, then this many a second.
BURST: Final = 50
RATE: Final = 10.0
_UNSET_LEVEL: Final = "it is sent again when agents next want another level"


_PYTHON_LEVEL: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class LogMessages:
    def __init__(
        self,
        alias: str,
        wake: Callable[[], None],
        guard: SecretGuard | None = None,
        answers: AnswerWait | None = None,
    ) -> None:
        """``guard``: what the logger a message names is searched with, as agents get it
        written again (its data goes on as the server's bytes, searched as they came);
        ``answers`` bounds the wait for the server's answer (none: unbounded)."""
        self.alias = alias
        self._answers = answers or AnswerWait(alias)
        self._wake = wake
        self._guard = guard or SecretGuard(KnownSecrets())
        self.on_message: Heard | None = None
        self.wanted: str | None = None  # the most verbose level an agent wants
        self.sent: str | None = None  # the level set on the current legacy session
        self.due = False
        self._bucket = Bucket(tokens=float(BURST), stamp=-1e18)
        self._logged = Throttle(BURST, 1.0 / RATE, trio.current_time, tell_every=SUMMARY_EVERY)

    def want(self, level: str | None) -> None:
        """Agents now want this server's messages at ``level`` or worse (None: none)."""
        if level != self.wanted:
            self.wanted = level
            self.due = True
            self._wake()

    def connected(self) -> None:
        """A new session: whatever was set on the last one is gone with it."""
        self.sent = None
        self.due = self.wanted is not None

    async def tend(self, up: Upstream) -> None:
        """From the server's own task: tell the server the level, if that is due."""
        self.due = False
        if up.era == "modern":
            up.meta.log_level = self.wanted
            return
        if not up.capabilities.logging:
            return
        target = self.wanted if self.wanted is not None else (QUIET if self.sent else None)
        if target is None or target == self.sent:
            return
        self.sent = target
        try:
            with self._answers.bounded("logging/setLevel", _UNSET_LEVEL):
                await up.request("logging/setLevel", server_logs.SetLevelParams(level=target))
        except rpc.RPCError as exc:
            logger.info(
                "%s: logging/setLevel %s refused: %s",
                self.alias,
                target,
                quote(exc.message),
                extra=log_extra(self.alias, reason=quote(exc.message)),
            )

    def on_notification(self, msg: rpc.Notification) -> None:
        if msg.method != "notifications/message":
            return
        message = server_logs.decode_log_message(msg.params)
        if message is None:
            return
        self._to_log(message)
        self._to_agents(message)

    def _to_log(self, message: LogMessage) -> None:
        # What journalctl shows, at the server's own severity (a server's error is
        # in `journalctl -p err`).
        level = _PYTHON_LEVEL.get(message.level, logging.INFO)
        if not logger.isEnabledFor(level):
            return  # not logged, so not counted against the budget either
        # The budget is spent here, before a record is made: a record made (and
        # searched for secrets) for each message of a flood, only for the handler to
        # drop it, would cost more than everything else about the message.
        held = self._logged.admit()
        if held is None:
            return
        alias = self.alias
        if held:
            logger.warning(
                "%d log messages from %s held back (too many at once)",
                held,
                alias,
                extra={**log_extra(alias, "message"), "mcpd_suppressed": held},
            )
        logger.log(level, "%s", server_logs.data_text(message), extra=log_extra(alias, "message"))

    def _to_agents(self, message: LogMessage) -> None:
        wanted = server_logs.rank(self.wanted)
        severity = server_logs.rank(message.level)
        if self.on_message is None or wanted is None or severity is None or severity < wanted:
            return  # nobody asked for it: it must not use up the budget of what was
        bucket = self._bucket
        held = bucket.suppressed
        if not bucket.take(trio.current_time(), BURST, RATE):
            return
        if held:
            bucket.suppressed = 0
            note = f"mcpd held back {held} log messages from this server (too many at once)"
            self.on_message(
                self.alias, LogMessage(level="warning", data=msgspec.Raw(msgspec.json.encode(note)))
            )
        cleaned = self._cleaned(message)
        if cleaned is not None:
            self.on_message(self.alias, cleaned)

    def _cleaned(self, message: LogMessage) -> LogMessage | None:
        """``message`` as agents may get it; None: its data is too deep to clean."""
        data = clean_data(message.data)
        if data is None:
            return None
        if data is not message.data:
            data = self._guard.reread(self.alias, data, "a log message")
            message = msgspec.structs.replace(message, data=data)
        named = message.logger
        if isinstance(named, str):
            masked = self._guard.text(self.alias, clean_text(named)[0], "a log message")
            if masked != named:
                message = msgspec.structs.replace(message, logger=masked)
        return message
