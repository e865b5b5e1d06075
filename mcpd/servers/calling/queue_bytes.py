"""The bytes kept by the calls that wait for a slot at their servers and by the other
requests under way there, at every server together, and whether one more may wait.

A call waits in its server's queue (``turns``) while the server's slots are taken or
while it starts, and keeps what it is to carry there: its arguments, the state and
answers of a retry, its ``_meta``, each up to a whole line. A request other than
tools/call (``requests``: a prompts/get, a resources/read, a completion) skips the
queue, but keeps its params until its server answers, which a server may never do.
Both are bounded in number (``queue_size`` a server, ``max_inflight_per_connection``
a connection), and at those counts alone a few connections could have more waiting
than the service may hold. So the bytes are shared out as those of the calls waiting
for a person are (``policy.waiting.approvals``), and by user as request bodies are
(``agents.http.body_budget``):

- one agent (its process) may have ``PER_AGENT`` waiting, at every server together;
- one user other than mcpd's own and root ``PER_USER``, all its processes together;
- everyone ``TOTAL``; mcpd's own user and root ``OWN_RESERVE`` more, so that they can
  still have a call wait whatever other users keep.

A call or request past a bound is refused before it waits, with a result (a JSON-RPC
error, for a request) that names the bound and says it is no outage: nothing is pushed
out for it, and no breaker hears of it. A call sent at once waits for nothing and is
never weighed. What a call that waits carries is copied out of its agent's line (a
part of a line keeps the whole of it), so the bytes counted are the bytes kept; they
are given back as it leaves the queue: sent, cancelled (its agent, too, gone), timed
out, or ended unsent. A request's params hold parts of its agent's line until it is
answered, so it is weighed by that line's params and by its ``_meta``, decoded apart
from the line; they are given back as it ends, however it ends.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Final, TypeVar

import msgspec

from protocol.mcp import core as mcp
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from .calls import Call, Unqueued, Whose

logger = logging.getLogger("mcpd.calls")

MIB: Final = 1024 * 1024
PER_AGENT: Final = 32 * MIB
PER_USER: Final = 64 * MIB
TOTAL: Final = 256 * MIB
OWN_RESERVE: Final = PER_AGENT
META_KEY: Final = "mcpd/queue"
_encode: Final = msgspec.json.Encoder().encode
_K = TypeVar("_K")


def carried(params: msgspec.Struct) -> int:
    """The bytes a request other than tools/call keeps while it is under way: its
    ``params`` as written (parts of them hold its agent's line), and its ``_meta``
    once more, decoded apart from that line."""
    size = len(_encode(params))
    # The params types share their ``_meta`` field by name, not by a base class.
    if "meta" in params.__struct_fields__:
        meta = msgspec.structs.asdict(params)["meta"]
        if isinstance(meta, dict) and meta:
            size += len(_encode(meta))
    return size


def amount(size: int) -> str:
    """``size`` bytes for people: in MiB, unless that would read as none."""
    if size >= MIB // 10:
        return f"{size / MIB:.1f} MiB"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} bytes"


class Over(msgspec.Struct, frozen=True):
    """The bound a call would pass: whose bytes (``agent``, ``user``, ``all``), what
    they may keep, what they keep now, and the call's own."""

    bound: str
    limit: int
    held: int
    size: int

    def words(self, whose: Whose, what: str = "call") -> str:
        """What the model reads of it (about a ``what``, a call or a request): which
        calls and requests keep how much, and their bound."""
        now = f"keep {amount(self.held)}, and this {what} would add {amount(self.size)}"
        if self.bound == "agent":
            return (
                f"the calls and requests this agent has waiting at mcpd's servers (for a "
                f"slot, or for an answer) {now}: one agent's may keep {amount(self.limit)}"
            )
        if self.bound == "user":
            return (
                f"the calls and requests of this agent's user ({_user(whose)}) waiting at "
                f"mcpd's servers {now}: one user's may keep {amount(self.limit)}"
            )
        most = f"all may keep {amount(TOTAL)}"
        if whose.own:
            most += f", and mcpd's own user and root {amount(OWN_RESERVE)} more"
        return f"the calls and requests waiting at mcpd's servers {now}: {most}"

    def advice(self) -> str:
        if self.bound == "agent":
            return (
                "Send it again once this agent's waiting calls and requests have been "
                "answered, or send less."
            )
        return "Send it again later, once fewer calls and requests wait, or send less."

    def reason(self, ended: str = "not queued") -> str:
        """A few words for the audit record, which start with how it ``ended``."""
        whose = {"agent": "its agent's", "user": "its user's", "all": "all"}[self.bound]
        return (
            f"{ended}: {whose} calls and requests waiting at mcpd's servers would keep "
            f"over {amount(self.limit)} (the bound)"
        )


def _user(whose: Whose) -> str:
    return "a user mcpd cannot name" if whose.uid is None else f"uid {whose.uid}"


class QueueBytes:
    """The bytes the waiting calls keep: all together, per agent, and per user other
    than mcpd's own and root."""

    def __init__(self) -> None:
        self.total = 0
        self._agents: dict[str, int] = {}
        self._users: dict[int | None, int] = {}
        self._refused = Throttle()

    def of_agent(self, whose: Whose) -> int:
        return self._agents.get(whose.agent, 0)

    def of_user(self, whose: Whose) -> int:
        return 0 if whose.own else self._users.get(whose.uid, 0)

    def refusal(self, call: Call, alias: str) -> mcp.CallToolResult | None:
        """Whether ``call``, which is to wait for ``alias``, may: None, its bytes copied
        apart and weighed (they are held once it is queued: ``take``); else the result
        it is refused with, which names the bound."""
        whose = call.caller.whose()
        size = call.weight()
        over = self._over(whose, size)
        if over is None:
            call.whose, call.kept = whose, call.kept_apart()
            return None
        call.unqueued = over.reason()
        self._log(alias, whose, over, "call")
        text = (
            f"mcpd did not send this call to '{alias}': it would have waited for a free slot "
            f"at the server, but {over.words(whose)}. This is a limit of mcpd's, not an "
            f"outage: '{alias}' keeps working. {over.advice()}"
        )
        meta = {"server": alias, **msgspec.structs.asdict(over)}
        return mcp.text_result(text, is_error=True, meta={META_KEY: meta})

    @contextlib.contextmanager
    def under_way(
        self, whose: Whose, alias: str, method: str, params: msgspec.Struct
    ) -> Iterator[None]:
        """A request of ``whose`` to ``alias`` (``method``, ``params``) keeps its bytes
        held for as long as this lasts, given back however it ends; past a bound it is
        refused at once with Unqueued, which names the bound."""
        size = carried(params)
        over = self._over(whose, size)
        if over is not None:
            self._log(alias, whose, over, "request")
            text = (
                f"mcpd did not send this {method} to '{alias}': it would have waited for "
                f"the server's answer, but {over.words(whose, 'request')}. This is a limit "
                f"of mcpd's, not an outage: '{alias}' keeps working. {over.advice()}"
            )
            meta = {"server": alias, **msgspec.structs.asdict(over)}
            raise Unqueued(text, {META_KEY: meta}, over.reason("not sent"))
        self._hold(whose, size)
        try:
            yield
        finally:
            self._let_go(whose, size)

    def _over(self, whose: Whose, size: int) -> Over | None:
        has = self.of_agent(whose)
        if has + size > PER_AGENT:
            return Over("agent", PER_AGENT, has, size)
        if whose.own:
            if self.total + size > TOTAL + OWN_RESERVE:
                return Over("all", TOTAL + OWN_RESERVE, self.total, size)
            return None
        has = self.of_user(whose)
        if has + size > PER_USER:
            return Over("user", PER_USER, has, size)
        if self.total + size > TOTAL:
            return Over("all", TOTAL, self.total, size)
        return None

    def take(self, call: Call) -> None:
        """``call`` is queued: its bytes are held (none, if it was never weighed)."""
        whose, size = call.whose, call.kept
        if whose is None or not size:
            return
        self._hold(whose, size)

    def give(self, call: Call) -> None:
        """``call`` left the queue: its bytes are given back."""
        whose, size = call.whose, call.kept
        if whose is None or not size:
            return
        call.whose = None
        self._let_go(whose, size)

    def _hold(self, whose: Whose, size: int) -> None:
        self.total += size
        self._agents[whose.agent] = self.of_agent(whose) + size
        if not whose.own:
            self._users[whose.uid] = self.of_user(whose) + size

    def _let_go(self, whose: Whose, size: int) -> None:
        self.total -= size
        _less(self._agents, whose.agent, size)
        if not whose.own:
            _less(self._users, whose.uid, size)

    def _log(self, alias: str, whose: Whose, over: Over, what: str) -> None:
        held = self._refused.admit()
        if held is None:
            return
        who = _user(whose) if whose.pid is None else f"pid {whose.pid}, {_user(whose)}"
        logger.warning(
            "%s: refused a %s of %s that would wait: %s%s",
            alias,
            what,
            who,
            over.words(whose, what),
            f" ({held} more since the last such line)" if held else "",
            extra=log_extra(alias, reason="calls and requests waiting at their bound"),
        )


def _less(counts: dict[_K, int], key: _K, size: int) -> None:
    left = counts[key] - size
    if left:
        counts[key] = left
    else:
        del counts[key]
