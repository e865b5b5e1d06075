"""Requests a legacy server sends back during a call, and which agent answers them.

A legacy server may ask its client to elicit input from the user, to sample the
host's model, or for the workspace roots, while it works on one of our requests.
mcpd is many agents' client at once, so each such request goes to the agent whose
request caused it, and never to another:

- over Streamable HTTP a server sends it on the response stream of the request it
  belongs to, so the cause is known exactly;
- on stdio (and on an HTTP session's push stream) nothing on the wire ties the two
  together. The cause is then the only agent with requests in flight on that server,
  those it is already being asked about and those that ended without the server's
  answer lately (``ended_asks``: the server may not have read so) counted; with
  several agents' or none, or several requests of a modern agent (asked through one
  of them) none yet asked, mcpd refuses to guess and answers the server an error.

A 2026-07-28 server makes no requests of its own: whatever it sends is refused as
that, whichever calls are in flight.

A few of a call's requests may wait for its agent at once, and so many of a
server's; one past either bound is refused at once, with an error that names it.
What the agent is asked is the server's request with its texts cleaned, every secret
mcpd holds masked (after the cleaning, which could join a secret split by a character
nobody sees), and the server named (``registry.text.relayed``), where their size says
(``taking_apart``: params too large to make that of are refused), when it has what
its method requires (``features.unfit_request``: one without is refused as malformed,
as an agent would be shown an empty form). A 2026-07-28 server
asks by ending its call with ``input_required``: the requests in it are made the same
way as the result comes in (``rpc_results``, where its size says), whoever is asked
them.

The agent's side of it (relaying the request to a legacy agent as a request of
mcpd's own, or handing a modern agent an ``input_required`` result) is behind
``Asker``; the servers' side never sees an agent.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra
from protocol.shown.visible import METHOD_SHOWN, quote
from transports.base import OVER_LIMIT, unsupported
from transports.errors import SERVER_REPLIES

from ...policy.redaction.guard import SecretGuard
from ...policy.redaction.masking import KnownSecrets
from ...registry.text.relayed import marked_params
from ..calling.agent_key import AgentKey
from ..results.rpc_results import UnfitRequest, cleaned_request, refused_ask
from ..results.taking_apart import ReplyWork, TooComplex
from .ended_asks import End, EndedAsks

logger = logging.getLogger("mcpd.askback")

# The agent behind the request this task is sending (set around each request of an
# agent's): an HTTP server's request arriving on that request's stream reads it.
ASKING: Final[contextvars.ContextVar[Asker | None]] = contextvars.ContextVar(
    "mcpd_asking", default=None
)
NO_ANSWER: Final = -32001  # implementation-defined: the agent did not answer
# A server works on a call in order and asks about one thing at a time: it waits for
# the answer before it goes on. A few more leave room for one that asks for roots or
# a sample while a question to the user is open; a server with more waiting has
# stopped waiting for them.
ASKS_PER_CALL: Final = 4
# However many calls are in flight: each waiting request holds what it asks, and a
# task, until its agent answers or ask_timeout passes.
ASKS_PER_SERVER: Final = 32


class Asker(Protocol):
    """The agent behind one request, as far as its server's requests go."""

    @property
    def owner(self) -> AgentKey:
        """The agent (the same object for every request of one agent)."""
        ...

    @property
    def direct(self) -> bool:
        """Whether the agent takes requests itself (a legacy client); otherwise each
        request ends the agent's own request with ``input_required``, which ties it to
        one request of the agent's."""
        ...

    async def ask(self, method: str, params: object) -> object:
        """The agent's answer (a result to send back), or rpc.RPCError to send."""
        ...


class Cause(Protocol):
    """An agent's request in flight on a server, which that server may ask about."""

    asker: Asker | None
    timeout: float  # its own time limit, restored once the agent answered
    asking: int  # requests of the server's for it still waiting for the agent

    def extend(self, seconds: float) -> None:
        """Give the request this many seconds from now."""
        ...


class _Inflight:
    __slots__ = ("_extend", "asker", "asking", "timeout")

    def __init__(self, asker: Asker, extend: Callable[[float], None] | None, timeout: float):
        self.asker: Asker | None = asker
        self._extend = extend
        self.timeout = timeout
        self.asking = 0

    def extend(self, seconds: float) -> None:
        if self._extend is not None:
            self._extend(seconds)


class AskRoutes:
    """One server's requests in flight on behalf of agents, and the handler its
    transport calls with the server's own requests."""

    def __init__(
        self,
        alias: str,
        timeout: Callable[[], float],
        relay: Iterable[str] = tuple(features.ASK_METHODS.values()),
        guard: SecretGuard | None = None,
        replies: ReplyWork | None = None,
        modern: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.alias = alias
        self._timeout = timeout
        # The 2026-07-28-era version the server speaks (None: legacy, or not yet known).
        # Such a server has no requests of its own to make: it asks in its results.
        self._modern = modern
        # Where what it asks is taken apart (and with which secrets masked): its
        # server's, which its results share.
        self._replies = replies or ReplyWork(alias, guard or SecretGuard(KnownSecrets()))
        # The kinds mcpd declared to the server (``servers.X.relay``): a server that asks
        # for another has been told it may not, and no agent is asked on its behalf.
        self._relay = frozenset(relay)
        # By a token of enter(), or by the call itself (enter_call()).
        self._inflight: dict[object, Cause] = {}
        # In the order they began (as is _inflight): a token is its request's place, a
        # call's is here.
        self._tokens = itertools.count(1)
        self._began: dict[object, int] = {}
        # The server asks as often as it likes: few refusals are logged, the rest counted
        # in the next line that is.
        self._said = Throttle(clock=trio.current_time)
        self._asking = 0  # its requests waiting for an agent, whatever the call
        self._ended = EndedAsks()
        self._over = False  # refusing past a bound: warned once until one is answered

    def enter(
        self, asker: Asker, extend: Callable[[float], None] | None = None, timeout: float = 0.0
    ) -> int:
        token = next(self._tokens)
        self._inflight[token] = _Inflight(asker, extend, timeout)
        return token

    def leave(self, token: int, end: End) -> None:
        item = self._inflight.pop(token, None)
        self._left(token, token, item.asker if item is not None else None, end, None)

    def enter_call(self, call: Cause) -> None:
        """A tools/call (its asker set) until ``leave_call``: the call is its own
        record, so a call costs no token, closure or record of its own here."""
        self._inflight[call] = call
        self._began[call] = next(self._tokens)

    def leave_call(self, call: Cause, end: End, rid: object = None) -> None:
        """The call is over, as ``end`` says; one left unanswered the server may not
        know is over until it answers the call (``rid``) after all (``ended_asks``)."""
        self._inflight.pop(call, None)
        self._left(call, self._began.pop(call, 0), call.asker, end, rid)

    def _left(self, key: object, began: int, asker: Asker | None, end: End, rid: object) -> None:
        if end is End.ANSWERED:
            self._answered(began)
        elif end is End.UNANSWERED and asker is not None:
            self._ended.add(key, asker.owner, rid, next(self._tokens))
        # Unsent, the server never had it: it neither asks about it nor read past it.

    def _answered(self, began: int) -> None:
        """The server answered the request that began at step ``began``."""
        # In the order they began, so the first is the oldest still open.
        oldest = next(iter(self._inflight), None)
        if oldest is not None and not isinstance(oldest, int):
            oldest = self._began.get(oldest, began)
        self._ended.answered_at(began, oldest)

    def answered_late(self, rid: object) -> None:
        """The transport's ``on_late_answer``."""
        self._ended.answered(rid)

    @contextlib.contextmanager
    def scope(
        self, asker: Asker | None, extend: Callable[[float], None] | None, timeout: float
    ) -> Iterator[None]:
        """Around one request of an agent's, sent from this task."""
        reset = ASKING.set(asker)
        token = self.enter(asker, extend, timeout) if asker is not None else None
        # Answered only by the server's reply (a result, or an error of its own); one
        # cancelled (its time up, its agent gone) or whose connection failed was not.
        end = End.UNANSWERED
        try:
            yield
            end = End.ANSWERED
        except SERVER_REPLIES:
            end = End.ANSWERED
            raise
        finally:
            ASKING.reset(reset)
            if token is not None:
                self.leave(token, end)

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def _cause(self) -> Cause | str:
        """The request a server's request is about, or why mcpd cannot tell."""
        here = ASKING.get()
        if here is not None:
            for item in self._inflight.values():
                if item.asker is here:
                    return item
            return _Inflight(here, None, 0.0)
        # Nothing says which call it is about. A call whose agent is still being asked
        # may be (a server may ask for roots or a sample while its question to the user
        # is open), so it is as much a candidate as any other; so is one that ended
        # moments ago, whose end the server may not have read yet.
        items = list(self._inflight.values())
        ended = self._ended.owners()
        if ended is None:
            return "so many requests ended lately that mcpd lost track of whose they were"
        if not items:
            return (
                "no agent has a request in flight on this server"
                if not ended
                else "the request it may be about has ended"
            )
        askers = [i.asker for i in items if i.asker is not None]
        owners = {id(a.owner) for a in askers}
        if len(askers) != len(items) or len(owners | ended) != 1:
            return (
                "requests of several agents are in flight on this server"
                if len(owners) > 1
                else "another agent's request on this server ended too lately to rule out"
            )
        # One agent's, whichever of its requests it is about: no other agent can be
        # asked. A request whose question is open is the less likely cause (a server
        # mostly asks once per call), so the others are looked at first.
        idle = [i for i in items if not i.asking] or items
        if len(idle) == 1:
            return idle[0]
        if all(a.direct for a in askers):
            # The agent is asked the same way whichever of its calls this is about: the
            # call with the fewest requests waiting bears its time and its bound.
            return min(idle, key=lambda i: i.asking)
        # One modern agent, several of its requests: which one's result carries it?
        return "several requests of one agent are in flight on this server"

    def _refuse(self, method: str, why: str, level: int | None = None) -> None:
        # Many servers ask for roots as soon as they start, with nobody to ask: that is
        # routine (and the server says so on its stderr), not worth an INFO line at
        # every start. A refusal while agents are at work is worth one.
        if level is None:
            level = logging.INFO if self._inflight else logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        held = self._said.admit()
        if held is None:
            return
        logger.log(
            level,
            "%s: refused its %s request: %s%s",
            self.alias,
            method,
            why,
            f" ({held} more like this not logged)" if held else "",
            extra=log_extra(self.alias, "ask_refused", why),
        )

    async def answer(self, req: rpc.Request) -> object:
        """The transport's ``on_request``: relay to the cause, or refuse."""
        kind = features.needs(req.method)
        if kind is None:
            raise rpc.RPCError(rpc.METHOD_NOT_FOUND, unsupported(req.method))
        version = self._modern()
        if version is not None:
            why = (
                f"it speaks {version}, whose servers ask their client in an input_required "
                "result, never with a request of their own"
            )
            self._refuse(req.method, why, level=logging.INFO)
            raise rpc.RPCError(rpc.METHOD_NOT_FOUND, f"mcpd refused this request: {why}")
        if kind not in self._relay:
            why = f"{kind} is not in servers.{self.alias}.relay"
            self._refuse(req.method, why)
            raise rpc.RPCError(
                rpc.METHOD_NOT_FOUND, f"mcpd did not offer {kind} to this server: {why}"
            )
        cause = self._cause()
        if isinstance(cause, str):
            why = cause
            self._refuse(req.method, f"{why}, so mcpd cannot tell whose it is")
            raise rpc.RPCError(
                rpc.INVALID_REQUEST,
                f"mcpd cannot tell which agent this {req.method} request is for: {why}",
            )
        over = self._over_bound(cause)
        if over is not None:
            self._refuse_over(req.method, over)
            raise rpc.RPCError(OVER_LIMIT, f"{over}; ask again once they are answered")
        try:
            params = await self._relayed(req)
        except UnfitRequest as exc:
            raise rpc.RPCError(rpc.INVALID_PARAMS, exc.reason) from None
        except TooComplex as exc:
            self._refuse(req.method, exc.reason)
            raise rpc.RPCError(rpc.INVALID_PARAMS, exc.reason) from None
        wait = self._timeout()
        cause.extend(wait + cause.timeout)
        cause.asking += 1
        self._asking += 1
        try:
            with trio.fail_after(wait):
                asker = cause.asker
                assert asker is not None  # a cause is made or entered with one
                return await asker.ask(req.method, params)
        except trio.TooSlowError:
            raise rpc.RPCError(
                NO_ANSWER, f"the agent did not answer {req.method} within {wait:g} s"
            ) from None
        finally:
            cause.asking -= 1
            self._asking -= 1
            self._over = False
            cause.extend(cause.timeout)

    async def _relayed(self, req: rpc.Request) -> dict[str, Any]:
        """The params the agent is asked with, made where their size says
        (``taking_apart``). Raises TooComplex for params too large to make them of,
        UnfitRequest for those that lack what the method requires."""
        given = req.params
        replies = self._replies
        shown = f"a {quote(req.method, METHOD_SHOWN)} request"
        if given is None or replies.at_once(given, shown, "clean what it asks the agent"):
            return self._made(req)
        return await replies.in_worker(lambda: self._made(req))

    def _made(self, req: rpc.Request) -> dict[str, Any]:
        # Touches nothing of the event loop's: it may run in the server's thread.
        given: Any = msgspec.json.decode(req.params) if req.params is not None else None
        why = features.unfit_request(req.method, given)
        if why is not None:
            raise refused_ask(self.alias, f"it sent a request for {req.method} whose {why}")
        params = cleaned_request(self.alias, req.method, given)
        params = self._replies.guard.value(self.alias, params, f"a {req.method} request")
        return marked_params(self.alias, req.method, params)

    def _over_bound(self, cause: Cause) -> str | None:
        """What a request for ``cause`` would exceed, in words; None if nothing."""
        if cause.asking >= ASKS_PER_CALL:
            return (
                f"mcpd passes at most {ASKS_PER_CALL} requests per call to its agent at a "
                "time, and that many of this call's wait for the agent's answer"
            )
        if self._asking >= ASKS_PER_SERVER:
            return (
                f"mcpd passes at most {ASKS_PER_SERVER} of one server's requests to agents "
                "at a time, and that many of this server's wait for an answer"
            )
        return None

    def _refuse_over(self, method: str, over: str) -> None:
        if self._over:
            return  # the flood that follows the first refusal is not logged
        self._over = True
        logger.warning(
            "%s: refused its %s request, and will refuse more until one waiting is answered: %s",
            self.alias,
            quote(method, METHOD_SHOWN),
            over,
            extra=log_extra(self.alias, "ask_refused", "over a bound"),
        )
