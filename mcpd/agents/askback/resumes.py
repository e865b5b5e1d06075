"""A 2026-07-28 server's ``input_required`` handed on to a modern agent, and the
agent's retry that continues it: the same call's next round, not a call of its own.

A legacy agent's rounds are driven by mcpd in one task, each looked at again under
what the last went under (``CallPolicy.again``): asked about once, counted against a
rate once. A modern agent drives its rounds itself, each a new ``tools/call`` that
may come on another connection (over HTTP, a new exchange). For it to meet the rules
as the legacy agent's rounds do, mcpd must know a retry for the continuation of a call
it let through, and nothing else may pass for one.

So the server's ``requestState`` never reaches the agent as it is: the agent gets a
token of mcpd's in its place (``hand_on``), and the retry that brings it back is
taken apart again (``take``), the server getting exactly its own state. A token names
what is kept in the daemon of the round it continues: whose call it was (the agent as
mcpd tells agents apart for rates, its user, its profile), the tool by the name the
agent called it and its arguments as a person is shown them (a retry whose arguments
another reader could read otherwise is refused, as a first round's are before anyone
is asked), what the call was sent under, a digest of the server's state, an expiry
and how many rounds the call has had. The server's state itself travels in the token,
so what the daemon keeps is small whatever a server writes there; the digest makes a
state the agent altered a refusal. A token is handed on only if the agent's retry can
carry it back, beside the arguments it repeats, on any route it may take
(``largest_state``): a server's state too large
for that ends the call with an error naming the server, rather than a retry mcpd would
refuse (on the socket, by closing the agent's connection and its other calls with it).

The agent never holds a server's state of its own, only mcpd's tokens: a call whose
``requestState`` is not a token of mcpd's continues nothing mcpd handed its agent, and
goes to the server without it or the answers it brings, a call of its own (the server
asks again what it needs). Otherwise the state carried in a token, read out of it,
could be sent by whoever saw the token, as often as they liked, answering what the
server asked the token's owner. Answers brought with no state at all continue no
round either, and go to the server as they came, as a stateless server's retry does.
An ``input_required`` of a call whose tool or rules changed before it came back is
handed on with a token too: its retry is then a call of its own, which meets the
rules anew.

A token is taken once: replayed, it names nothing. One brought by another agent, in
another profile, for another tool or other arguments is refused without being used
up, so whoever saw it cannot spend the owner's round. A continuation goes on under
``CallPolicy.again``: the tool as the profile lists it now (gone, held or defined
anew: refused), the rules now (the same decision: no second ask, no second charge; a
``deny``: refused; another rule's ``ask``: a person decides). A call continued past
``MAX_ROUNDS`` ends with an error, as a legacy agent's rounds do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import secrets
from collections.abc import Callable
from typing import Any, Final

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import DEFAULT_MAX_LINE
from protocol.mcp import core as mcp
from protocol.mcp import features

from ...config.tables.model import DaemonConfig
from ...policy.agent import AgentInfo
from ..agent import AgentCall, Sent
from ..entry.peers import owners_uid
from ..entry.shares import Holdings, count_shares
from ..profiles import Profile
from .askers import MAX_ROUNDS, own_token
from .bound import binding, other_arguments
from .state_bound import NONCE_BYTES, PREFIX, largest_state, repeated_bytes, why_unsendable

logger = logging.getLogger("mcpd.askback")

# How long a modern agent may take to retry: its user may be answering a form.
KEEP_FOR: Final = 600.0
# Rounds kept for one agent, and for all: past them the oldest are forgotten (their
# retries are refused as expired), so an agent that never retries costs a bounded sum.
# All's are shared out by user (``entry.shares``): past one user's share its own agent
# holding the most forgets its oldest, past all's the user holding the most does, so
# another user's processes, however many, cannot push out the rounds of mcpd's own
# user's agent waiting for its person to answer.
PER_AGENT: Final = 64
KEPT_AT_MOST: Final = 4096

_HEAD: Final = msgspec.json.Decoder(features.ResultHead)


class Resumed(msgspec.Struct, frozen=True):
    """A retry that continues a call: what that call was last sent under, and its
    record's decision."""

    sent: Sent
    decision: str
    decided_by: str


class _Round(msgspec.Struct, frozen=True):
    agent: str  # AgentInfo.key
    uid: int | None
    profile: str
    local: str
    arguments: bytes  # what binds them (``bound``)
    state: bytes | None  # digest of the server's requestState; None: it sent none
    sent: Sent | None  # None: its retry is a call of its own (``allowed_as``)
    decision: str
    decided_by: str
    expires: float


class Resumes:
    def __init__(
        self,
        clock: Callable[[], float] = trio.current_time,
        max_line_bytes: Callable[[], int] = lambda: DEFAULT_MAX_LINE,
        settings: Callable[[], DaemonConfig] = DaemonConfig,
    ) -> None:
        self._clock = clock
        self._max_line_bytes = max_line_bytes  # the daemon's, as it is now
        self._settings = settings  # what sets one user's share of the rounds kept
        self._kept: dict[str, _Round] = {}  # by nonce, oldest first
        self._held: Holdings[str] = Holdings()  # how many each user and agent has kept

    def hand_on(
        self, result: Raw, call: AgentCall, who: AgentInfo, sent: Sent | None
    ) -> tuple[Raw | dict[str, object], bool]:
        """``result`` as the modern agent of ``call`` gets it, and whether it is an
        error: an ``input_required`` with a token of mcpd's for its ``requestState``
        (for a call let through under ``sent``; None: it cannot be continued, and the
        retry is a call of its own); anything else as it is."""
        try:
            head = _HEAD.decode(result)
        except msgspec.DecodeError:
            return result, False
        if head.kind != mcp.INPUT_REQUIRED:
            return result, False
        alias = call.out.alias
        if sent is not None and sent.rounds >= MAX_ROUNDS:
            return _ended(
                f"The tool server {alias!r} asked for more input {MAX_ROUNDS + 1} times "
                f"in one call; mcpd ends a call after {MAX_ROUNDS} rounds of answers."
            ), True
        state = head.requestState
        repeated = repeated_bytes(call.out.name, call.out.arguments)
        why = why_unsendable(alias, state, largest_state(self._max_line_bytes(), repeated))
        if why is not None:
            return _ended(
                f"The tool server {alias!r} asked for more input, but {why}, so this call "
                "cannot go on; calling the tool again may get a smaller one."
            ), True
        nonce = secrets.token_urlsafe(NONCE_BYTES)
        self._keep(
            nonce,
            _Round(
                agent=who.key,
                uid=who.uid,
                profile=call.profile,
                local=call.out.name,
                arguments=binding(call.out.arguments)[0],
                state=hashlib.sha256(state).digest() if isinstance(state, Raw) else None,
                sent=None
                if sent is None
                else msgspec.structs.replace(sent, rounds=sent.rounds + 1),
                decision=call.decision,
                decided_by=call.decided_by,
                expires=self._clock() + KEEP_FOR,
            ),
        )
        token = PREFIX + nonce
        if isinstance(state, Raw):
            token += "." + _carried(bytes(state))
        handed: dict[str, Any] = msgspec.json.decode(result)
        handed["requestState"] = token
        return handed, False

    def take(
        self, call: AgentCall, who: AgentInfo, profile: Profile
    ) -> Resumed | rpc.RPCError | None:
        """What ``call`` (of ``who``, in ``profile``), a retry that brings a
        ``requestState`` or ``inputResponses``, continues: the round its token of
        mcpd's names, used up, with the server's own state put back in ``call``; None
        when that round's retry is a call of its own (its state put back too), or when
        it brings no token of mcpd's (a state it brings is then left out of ``call``,
        with its answers; answers alone continue no round, and go on as a stateless
        server's retry or a first call's answers would); the
        error it gets when it brings a token that is used, expired, altered or not its
        to continue."""
        token = own_token(call.out.request_state, PREFIX)
        if token is None:
            if call.out.request_state is not UNSET:
                # A state mcpd did not hand out, and the answers that go with it.
                call.out.request_state = call.out.input_responses = UNSET
            return None
        nonce, dot, carried = token.removeprefix(PREFIX).partition(".")
        kept = self._kept.get(nonce)
        if kept is None or kept.expires <= self._clock():
            self._forget(nonce)
            return _refused(
                "names no call mcpd continues (it was used already, or it expired); "
                "call the tool again without it"
            )
        whose = _whose(kept, call, who)
        if whose is not None:
            return _refused(f"continues {whose}")
        try:
            server_state = base64.urlsafe_b64decode(carried.encode("ascii")) if dot else None
        except (binascii.Error, ValueError):
            server_state = b""
        if server_state is not None and _carried(server_state) != carried:
            # Decoding stops at the padding and skips what follows: a state with
            # something written after it must not pass for the one mcpd gave.
            server_state = b""
        digest = None if server_state is None else hashlib.sha256(server_state).digest()
        if digest != kept.state:
            return _refused("was altered: it is not the one mcpd gave")
        self._forget(nonce)
        call.out.request_state = _state(server_state)
        if kept.sent is None:
            return None
        # Its tool is looked up again in the profile as it is now.
        sent = msgspec.structs.replace(kept.sent, profile=profile)
        return Resumed(sent, kept.decision, kept.decided_by)

    def _keep(self, nonce: str, kept: _Round) -> None:
        """Keep ``kept`` under ``nonce``, once the expired are forgotten and room is
        made for it."""
        rounds = self._kept
        now = self._clock()
        while rounds:
            oldest = next(iter(rounds))
            if rounds[oldest].expires > now:
                break
            self._forget(oldest)
        mine = [n for n, r in rounds.items() if r.agent == kept.agent]
        for gone in mine[: max(0, len(mine) - PER_AGENT + 1)]:
            self._forget(gone)
        limits = count_shares(self._settings(), KEPT_AT_MOST)
        own = owners_uid(kept.uid)
        while (agent := self._held.to_give_up(limits, kept.uid, own, 1)) is not None:
            self._forget(next(n for n, r in rounds.items() if r.agent == agent))
        rounds[nonce] = kept
        self._held.take(kept.uid, kept.agent, 1)

    def _forget(self, nonce: str) -> None:
        kept = self._kept.pop(nonce, None)
        if kept is not None:
            self._held.give(kept.agent, 1)


def _ended(text: str) -> dict[str, object]:
    """A modern agent's call ended by mcpd, in ``text``: an error result it reads."""
    error = {"content": [{"type": "text", "text": text}], "isError": True}
    return {**error, "resultType": mcp.COMPLETE}


def _carried(state: bytes) -> str:
    """The server's state as a token of mcpd's carries it."""
    return base64.urlsafe_b64encode(state).decode("ascii")


def _whose(kept: _Round, call: AgentCall, who: AgentInfo) -> str | None:
    """How the call ``kept`` continues differs from ``call`` (of ``who``); None when
    ``call`` is its next round."""
    if (kept.agent, kept.uid) != (who.key, who.uid):
        return "another agent's call"
    if kept.profile != call.profile:
        return f"a call in the profile {kept.profile!r}"
    if kept.local != call.out.name:
        return f"a call of {kept.local!r}"
    return other_arguments(kept.arguments, call.out.arguments)


def _state(server_state: bytes | None) -> Raw | UnsetType:
    return UNSET if server_state is None else Raw(server_state)


def _refused(why: str) -> rpc.RPCError:
    return rpc.RPCError(rpc.INVALID_PARAMS, f"this requestState is mcpd's and {why}")
