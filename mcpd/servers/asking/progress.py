"""Progress notifications, routed from a server back to the one agent that asked.

Each call that carries an agent's ``progressToken`` gets a token of mcpd's own for the
server, so two agents using the same token can never see each other's progress. Each
report also tells the call's scheduler, which may push the call's deadline out. A
report's message is the server's text before a model: it is cleaned as an error's is,
and each of its lines that begins with a bracket gets the server's mark
(``registry.text.marking``). A report is read and written again for its agent, so it is
searched for mcpd's secrets as written (``SecretGuard.reread``), after the cleaning
(which could join a secret split by a character nobody sees).

A report is held to what a status line needs: a message longer than ``MESSAGE_CHARS``
is cut to it, with a note of how much was cut, and a report whose progress is not
greater than the last one passed on for its call is not passed on, as progress only goes
up (the first report of a call always goes on). Such a report still gives its call more
time: a server that repeats one value as a heartbeat is still working on the call. The
journal says so once per call.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Final, TypeAlias

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra

from ...registry.text.marking import server_words
from .askback import Cause

logger = logging.getLogger("mcpd.calls")

# A report's message longer than this, in characters, is cut to it.
MESSAGE_CHARS: Final = 1000

# Where the server's progress reports for a call go (its agent).
ProgressSink: TypeAlias = Callable[[mcp.ProgressParams], None]
# A report's params as they may be read: with every secret in what mcpd writes of them
# masked.
MaskParams: TypeAlias = Callable[[Raw], Raw]


def _as_sent(params: Raw) -> Raw:
    return params


class ProgressRoutes:
    def __init__(self, prefix: str, reread: MaskParams = _as_sent, alias: str = "server") -> None:
        self._prefix = prefix
        self._reread = reread
        self._alias = alias
        # By mcpd's token: the agent's token, where its reports go, and the call.
        self._routes: dict[str, tuple[str | int, ProgressSink, Cause]] = {}
        # By mcpd's token: the progress of the last report passed on.
        self._last: dict[str | int, int | float] = {}
        # mcpd's tokens whose call the journal was told drops reports that do not go up.
        self._told_flat: set[str | int] = set()
        self._ids = itertools.count(1)

    def open(self, agent_token: str | int, deliver: ProgressSink, call: Cause) -> str:
        """A token for the server; each report also gives ``call`` its time again."""
        token = f"{self._prefix}{next(self._ids)}"
        self._routes[token] = (agent_token, deliver, call)
        return token

    def close(self, token: str) -> None:
        self._routes.pop(token, None)
        self._last.pop(token, None)
        self._told_flat.discard(token)

    def handle(self, msg: rpc.Notification) -> bool:
        """Deliver a ``notifications/progress``; False if it belongs to no open call."""
        given = msg.params
        if given is None:
            return False
        try:
            params = rpc.decode_as(given, mcp.ProgressParams)
        except rpc.InvalidParams:
            return False
        token = params.progressToken
        route = self._routes.get(token)  # type: ignore[arg-type]
        if route is None:
            return False
        agent_token, deliver, call = route
        # The server is working on it: more time, within the call's hard limit.
        call.extend(call.timeout)
        if not self._goes_up(token, params.progress):
            self._tell_flat(token)
            return True  # not progress: not passed on
        if isinstance(params.message, str):
            words = server_words(self._alias, params.message[:MESSAGE_CHARS])
            words = _cut_note(words, len(params.message))
            if words != params.message:
                params = msgspec.structs.replace(params, message=words)
                given = Raw(msgspec.json.encode(params))
        seen = self._reread(given)
        if seen is not given:
            try:
                params = rpc.decode_as(seen, mcp.ProgressParams)
            except rpc.InvalidParams:
                return True  # a number held a secret: no report is left to pass on
        deliver(msgspec.structs.replace(params, progressToken=agent_token))
        return True

    def _goes_up(self, token: str | int, progress: int | float) -> bool:
        """Whether a report of ``progress`` for ``token`` goes on: the first, or one
        greater than the last that went on (which it then is)."""
        last = self._last.get(token)
        if last is not None and not progress > last:
            return False
        self._last[token] = progress
        return True

    def _tell_flat(self, token: str | int) -> None:
        """Tell the journal, once per call, that its reports that do not go up are
        not passed on."""
        if token in self._told_flat:
            return
        self._told_flat.add(token)
        logger.info(
            "%s: a progress report not greater than the last was not passed on to its "
            "agent (and no more of this call's such reports will be; each still gives "
            "the call more time)",
            self._alias,
            extra=log_extra(self._alias, "progress_flat"),
        )


def _cut_note(words: str, total: int) -> str:
    """``words`` (a message's first ``MESSAGE_CHARS`` characters, marked), with a note
    of how much was cut when the message of ``total`` characters was longer."""
    if total <= MESSAGE_CHARS:
        return words
    return f"{words} [mcpd: {total - MESSAGE_CHARS} more characters were cut here]"
