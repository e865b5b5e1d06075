"""A server's call scheduler: admission, a bounded queue, time limits, completion.

Calls are driven by callbacks rather than a task and a cancel scope each: a stdio
server's reply completes its call straight from the transport's reader, a timer task
per server expires calls from one heap of deadlines, and a finished call hands its
slot to the next queued one at once. Whatever carries a call to its server (a line
on stdin, an HTTP exchange in a task of its own) is the upstream's business: every
call is scheduled, timed and accounted for here the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra
from transports.errors import SERVER_REPLIES, TransportError

from ..asking.askback import AskRoutes
from ..asking.ended_asks import End
from ..asking.progress import ProgressRoutes
from ..life.lazy_state import Demand
from ..life.standing import Standing
from ..results.rpc_results import Findings, call_look, taken_apart
from ..results.taking_apart import ReplyWork
from ..status.outage import Outage
from .call_failures import error_reply, failed
from .calls import Admitter, Answered, Call, CallEnd, Outcome, QueuedCheck, Unsent
from .deadlines import Deadlines
from .queue_bytes import QueueBytes
from .refusals import breaker_refusal, no_slot, queue_full
from .turns import TurnQueue

if TYPE_CHECKING:
    from ..connected.upstream import Upstream

logger = logging.getLogger("mcpd.calls")

_RESULT: Final = "a tools/call result"


class CallScheduler(Admitter):
    def __init__(
        self,
        server: Standing,
        *,
        progress: ProgressRoutes,
        asks: AskRoutes,
        replies: ReplyWork,
        limit: int,
        waiting: QueueBytes | None = None,
    ) -> None:
        self.server = server
        self.progress = progress  # where the server's reports on a call go
        self.asks = asks  # where what the server asks during a call goes
        self.replies = replies  # where its answers are taken apart
        self.limit = limit
        self.running = 0
        self.requests = 0  # other requests under way (``requests.send``)
        # The bytes every server's waiting calls keep (None: this server's alone).
        self.waiting = QueueBytes() if waiting is None else waiting
        self.queue = TurnQueue(self.waiting)
        self.deadlines = Deadlines(self._live)
        # Made only when someone waits for the calls to end (a stop or reload), not
        # each time the server goes from idle to busy: at one call at a time, every call.
        self._idle: trio.Event | None = None
        self._up: Upstream | None = None
        # Set once the server is being stopped: why every call from then on is refused.
        self._stopping: Outage | None = None
        # The run's clock itself: ``trio.current_time`` looks it up again on every read,
        # and a tools/call reads it at each step. Built inside the run, as a server's parts are.
        self._now: Callable[[], float] = trio.lowlevel.current_clock().current_time
        self.demand: Demand | None = None
        # When the server last answered anything (a call, or through its upstream any
        # other request): what settles a call that ran out of time (``health``).
        self.answered_at = -math.inf

    # -- the server coming and going --

    def attach(self, up: Upstream) -> None:
        self._up = up
        self._start_queued()

    def detach(self) -> None:
        self._up = None

    def fail_queued(self, outage: Outage) -> None:
        while self.queue:
            self._finish(self.queue.pop_first(), Unsent(outage))

    def stop_sending(self, outage: Outage) -> None:
        """The server is being stopped: the calls waiting for it, and any call admitted
        from now on, end with ``outage`` unsent; those it runs go on. A call handed to
        it now would be cut short by the stop, after it may have done part of its work."""
        self._stopping = outage
        self.fail_queued(outage)

    def look_again(self, check: QueuedCheck) -> None:
        """Each queued call put to ``check``: one it refuses ends now, never sent."""
        for call in list(self.queue):
            refused = check.refusal(call)
            if refused is not None and call.state == "queued":
                self.queue.remove(call)
                self._finish(call, Unsent(refused))

    def answered(self) -> None:
        self.answered_at = self._now()

    async def wait_idle(self) -> None:
        """Until no call runs; the calls waiting for a slot are not waited for."""
        if self.running:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    # -- calls --

    def start(self, call: Call) -> None:
        """Admit ``call``: sent now, queued, or finished at once with why not. Its
        outcome goes to ``call.caller`` once, unless it is cancelled first."""
        r = self.server
        call.scheduler = self
        if not call.timeout:
            call.timeout = r.limits.timeout(call.original)
        if self.demand is not None:
            self.demand.begin()
        up = self._up
        if call.asker is not None and (up is None or up.era != "modern"):
            # While it is under way its server may ask the call's agent things (a
            # modern server never sends requests: nothing to route back).
            call.relays = True
            self.asks.enter_call(call)
        if self._stopping is not None:
            self._finish(call, Unsent(self._stopping))
            return
        if up is None:
            if not r.waits_for_start():
                self._finish(call, Unsent(r.outage()))
            elif self._may_wait(call):
                # The server is coming up (first or on demand): wait, within the call's time.
                self._enqueue(call, call.timeout)
            return
        if self.running < self.limit and not self.queue.calls:
            self._send(call)
            return
        if not self._may_wait(call):
            return
        d = r.limits
        if len(self.queue) >= d.queue_size:
            busy = queue_full(r.alias, len(self.queue))
            pushed = self.queue.pushed_out(call.owner)
            if pushed is None:
                self._finish(call, Unsent(busy))
                return
            self.queue.remove(pushed)
            self._finish(pushed, Unsent(busy))
        self._enqueue(call, d.queue_timeout)

    def _may_wait(self, call: Call) -> bool:
        """Whether ``call`` may wait, for the bytes it keeps; if not, it ends refused (before
        the queue's places are counted: it takes no other call's)."""
        refused = self.waiting.refusal(call, self.server.alias)
        if refused is None:
            return True
        self._finish(call, Unsent(refused))
        return False

    def cancel(self, call: Call) -> None:
        if call.state == "queued":
            self.queue.remove(call)
            call.state = "cancelled"
            self._ended(call, End.UNSENT)
        elif call.state == "running":
            call.state = "cancelled"
            self._release(call)
            self._forget(call, "cancelled by the client")
            self._start_queued()
            self._ended(call, End.UNANSWERED)
        elif call.state == "answered":
            # Its server replied: what is made of the reply meanwhile goes nowhere.
            call.state = "cancelled"
            self._ended(call, End.ANSWERED)

    def _enqueue(self, call: Call, wait: float) -> None:
        # Queued calls wait with the same allowance, so their deadlines only grow in
        # the order they arrived: the timer looks at the first, no heap needed.
        call.state = "queued"
        call.deadline = self._now() + wait
        if self.queue and self.queue.last().deadline > call.deadline:
            call.deadline = self.queue.last().deadline  # a shorter startup wait after a longer
        self.queue.append(call)
        self.deadlines.coming(call.deadline)

    def _start_queued(self) -> None:
        while self.queue.calls and self.running < self.limit and self._up is not None:
            self._send(self.queue.take())

    def _send(self, call: Call) -> None:
        r = self.server
        up = self._up
        assert up is not None
        now = self._now()
        adm = r.breaker.allow(now)
        if not adm.allowed:
            self._finish(call, Unsent(breaker_refusal(r.alias, adm)))
            return
        call.ticket, call.probe = adm.ticket, adm.probe
        call.state = "running"
        call.sent_at = now
        call.limit = now + r.limits.max_call_time
        self.running += 1
        self.deadlines.set(call, now + call.timeout)
        meta = call.meta
        if meta is not None and mcp.KEY_PROGRESS_TOKEN in meta:
            self._open_progress(call, meta[mcp.KEY_PROGRESS_TOKEN])
        try:
            up.start(call)
        except (TransportError, rpc.RPCError) as exc:
            # Counted as the failure it is, but it never reached the server: nothing
            # the server does next can be about it.
            call.state = "done"
            ended = failed(r, call, exc, False, now, 0.0, self._forget)
            self._finish(call, Unsent(ended.outcome), slot=True)

    def extend(self, call: Call, seconds: float) -> None:
        """A running call's time limit, now ``seconds`` from now (within its hard
        limit): its server is waiting for the call's agent to answer a request."""
        if call.state == "running":
            self.deadlines.set(call, min(self._now() + seconds, call.limit))

    def _open_progress(self, call: Call, agent_token: object) -> None:
        # Apart from _send: most calls carry no token.
        if call.progress is not None and isinstance(agent_token, str | int):
            call.progress_token = self.progress.open(agent_token, call.progress, call)
        # Otherwise nobody takes its reports: it goes to the server without a token.

    # -- outcomes --

    def received(self, call: Call, raw: Raw | None, error: BaseException | None) -> None:
        """The transport's answer to ``call``: its server's result or error, or its own."""
        if call.state != "running":
            return  # cancelled, or already timed out: a late answer is dropped
        call.state = "done"
        r = self.server
        now = self._now()
        elapsed = now - call.sent_at
        ending: CallEnd
        if raw is not None and error is None:  # every call, nearly
            self.answered_at = now
            # The same bytes unless they hold a secret mcpd holds, a key of its own or
            # ask the agent something: a reply stays spliced, its head read once here.
            found = call_look(r.guard, r.alias, raw, legacy=self.replies.legacy)
            if isinstance(found, Findings):
                call.head = None  # its bytes change: read again as they are
                work = partial(taken_apart, r.guard, r.alias, raw, _RESULT, found)
                self._take_apart(call, raw, _RESULT, found.why, work, now, elapsed, error=False)
                return
            call.head = found
            ending = Answered(raw)
            r.breaker.record_success(now, call.ticket)
            r.stats.record(elapsed)
        elif isinstance(error, rpc.RPCError):
            self.answered_at = now
            # What it tells of the server, and its data taken apart as a result is.
            data, what, why, made = error_reply(r, error)
            self._take_apart(call, data, what, why, made, now, elapsed, error=True)
            return
        else:
            if isinstance(error, SERVER_REPLIES):
                self.answered_at = now
            ending = failed(r, call, error, False, now, elapsed, self._forget)
        self._finish(call, ending, slot=True)

    def _take_apart(
        self,
        call: Call,
        raw: Raw | None,
        what: str,
        why: str,
        work: Callable[[], Raw | rpc.RPCError],
        now: float,
        elapsed: float,
        *,
        error: bool,
    ) -> None:
        """``received`` for an answer whose ``raw`` (a result, an error's data; None:
        nothing to take apart) must be taken apart (``taking_apart``) by ``work``: at
        once, or (too big for that) in the server's thread while the agent waits. The
        server replied either way, however its reply turns out (``error``: with an
        error, which its latency is counted as)."""
        r = self.server
        ending: CallEnd
        later = False
        try:
            if raw is not None and not self.replies.at_once(raw, what, why):
                later = self.replies.in_thread(work, lambda done: self._taken_apart(call, done))
            if not later:
                ending = Answered(work())
        except MalformedReply as exc:
            ending = failed(r, call, exc, False, now, elapsed, self._forget)
        else:
            r.breaker.record_success(now, call.ticket)
            r.stats.record(elapsed, error=error)
        if not later:
            self._finish(call, ending, slot=True)
            return
        # The server's part is over (its slot free, what it asks not about this call).
        call.state = "answered"
        self._release(call)
        if self.queue.calls:
            self._start_queued()
        if call.relays:
            call.relays = False
            self.asks.leave_call(call, End.ANSWERED, call.sent_id)

    def _taken_apart(self, call: Call, done: Raw | rpc.RPCError | MalformedReply) -> None:
        if call.state != "answered":
            return  # cancelled meanwhile
        outcome: Outcome
        if isinstance(done, MalformedReply):
            r = self.server
            outcome = Outage(r.alias, "malformed", done.reason, call.sent_at).masked(r.guard)
        else:
            outcome = done
        self._finish(call, Answered(outcome))

    def _forget(self, call: Call, why: str) -> None:
        """The server is told to stop (if it has the call), and its answer is dropped."""
        if self._up is not None:
            self._up.forget(call, why)
        elif call.scope is not None:
            call.scope.cancel()

    def _release(self, call: Call) -> None:
        self.running -= 1
        self.deadlines.drop_ended()
        if call.progress_token is not None:
            self.progress.close(call.progress_token)
            call.progress_token = None
        if call.probe:
            self.server.breaker.release_probe(call.ticket)
        if self.running == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    def _finish(self, call: Call, ending: CallEnd, *, slot: bool = False) -> None:
        """Deliver the call's one outcome, first freeing the slot it held (``slot``)."""
        if slot:
            # After the breaker's verdict on this call, never before: a probe released
            # first would make the breaker take the probe's own outcome as stale.
            self._release(call)
            if self.queue.calls:
                self._start_queued()
        call.state = "done"
        self._ended(call, ending.end)
        try:
            call.caller.finish(ending.outcome)
        except Exception:
            alias = self.server.alias
            said = "%s: delivering a call's outcome failed"
            logger.exception(said, alias, extra=log_extra(alias))

    def _ended(self, call: Call, end: End) -> None:
        if call.relays:
            call.relays = False
            # Given up on, it may still be asked about by a server that has not read so.
            self.asks.leave_call(call, end, call.sent_id)
        if self.demand is not None:
            self.demand.end()

    # -- time limits --

    def _live(self) -> int:
        """How many calls are under way: running or queued."""
        return self.running + len(self.queue)

    async def run_timer(self) -> None:
        """Expire queued and running calls whose time is up (runs for the server's life)."""
        r, queue = self.server, self.queue
        while True:
            now = self._now()
            while queue and queue.first().deadline <= now:
                waited = r.outage() if self._up is None else no_slot(r.alias, r.limits, self.limit)
                self._finish(queue.pop_first(), Unsent(waited))
            for call in self.deadlines.due(now):
                if call.state == "running":  # no answer within its time
                    call.state = "done"
                    at = self._now()
                    ended = failed(r, call, None, True, at, at - call.sent_at, self._forget)
                    self._finish(call, ended, slot=True)
            await self.deadlines.sleep(queue.first().deadline if queue else math.inf)
