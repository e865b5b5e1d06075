"""Each request an agent makes of a server's tools, prompts, resources and completions,
as its audit record: made once, where its outcome passes (a tools/call's in
``Router.reply``, or where it was cancelled), from what the call carried since it was
read (when it came, what the policy decided and who decided it).

What came of it is named in a few words (``CallRecord.outcome``): ``ok``,
``tool_error`` (a result with ``isError``), ``refused`` (mcpd answered it itself: the
policy, a held definition, an unknown name), ``outage`` or ``timeout`` (the server
could not answer), ``cancelled`` (the agent stopped waiting, or mcpd stopped first:
the audit log gives those the reason ``STOPPED``) or ``error`` (a JSON-RPC error).
A call over HTTP is recorded once its answer was written or could not be: a client
gone by then makes it ``cancelled`` (``AGENT_GONE``), whatever its server answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.mcp import core as mcp
from protocol.shown.visible import cut

from ...audit.log import AuditLog
from ...audit.record import METHODS, NO_DECISION, AuditOutcome, CallRecord, kept, unknown
from ...policy.agent import AgentInfo
from ...servers.shared import Outage, Outcome, Unqueued
from ..agent import Agent, AgentCall

_REASON: Final = 200  # characters of a reason kept (``reason_kept``)
# Why a request was refused before it started (``CallRecords.turned_away``).
ID_IN_USE: Final = "its id was in use by a request in flight"
AT_LIMIT: Final = "its agent had as many requests in flight as it may"
# What a request mcpd answered itself, before any server or rule, comes to when it is
# refused: the audit log counts these past their agent's budget (``AuditLog.unrouted``).
REFUSED_HERE: Final = frozenset({"refused", "error"})
# Why a call over HTTP whose answer came is recorded as cancelled: it was not written.
AGENT_GONE: Final = "its agent had gone before the answer was written"


def reason_kept(text: str) -> str:
    """A reason as a record keeps it: cut with the note masking looks for, as it may
    quote a secret that the cut, made before the record is masked, falls inside."""
    return cut(text, _REASON)


def outcome_of(outcome: object, failed: bool = False) -> tuple[AuditOutcome, str | None]:
    """The record's words for a request's outcome: a server's result (``failed``: it
    says ``isError``), an ``Outage``, a JSON-RPC error, or a result of mcpd's own."""
    if isinstance(outcome, Raw | bytes):
        return ("tool_error" if failed else "ok"), None
    if isinstance(outcome, Outage):
        return ("timeout" if outcome.state == "timeout" else "outage"), kept(outcome.reason)
    if isinstance(outcome, rpc.RPCError):
        return "error", reason_kept(outcome.message)
    if isinstance(outcome, mcp.CallToolResult) and outcome.isError:
        return "refused", _first_text(outcome)
    return "ok", None


def ended(exc: BaseException) -> tuple[AuditOutcome, str | None]:
    """What a request that ended with ``exc``, and no reply, came to: cancelled (trio's
    cancellation, alone or gathered from a nursery), or an error of mcpd's."""
    if isinstance(exc, trio.Cancelled):
        return "cancelled", None
    if isinstance(exc, BaseExceptionGroup) and all(
        ended(e)[0] == "cancelled" for e in exc.exceptions
    ):
        return "cancelled", None
    return "error", f"mcpd failed: {type(exc).__name__}"


def _first_text(result: mcp.CallToolResult) -> str | None:
    for block in result.content:
        if isinstance(block, mcp.TextContent):
            text: object = block.text
        else:
            text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str):
            return reason_kept(text)
    return None


class Seen:
    """What one prompts/get, resources/read or completion/complete came to, filled in
    as it is answered: what it named, the server and the server's name for it once
    routed, its arguments, and the outcome its server's answer was."""

    __slots__ = ("arguments", "name", "outcome", "refusal", "target")

    def __init__(self) -> None:
        self.name: str | None = None
        self.target: tuple[str, str] | None = None
        self.arguments: Raw | None = None
        self.outcome: Outcome | None = None
        # mcpd's refusal to send it again with its agent's answers.
        self.refusal: rpc.RPCError | None = None

    def words(self, refused: rpc.RPCError | None = None) -> tuple[AuditOutcome, str | None]:
        """The record's outcome: the server's answer's; else ``refused``, mcpd's own
        refusal of what was named (an unknown or held item, or one its bytes would keep
        past a bound)."""
        if isinstance(self.outcome, Unqueued):
            return "refused", self.outcome.reason
        if self.outcome is not None:
            return outcome_of(self.outcome)
        refused = refused or self.refusal
        if refused is not None:
            return ("refused" if self.name is not None else "error"), reason_kept(refused.message)
        return "ok", None


class _Ref(msgspec.Struct):
    name: str | None = None
    uri: str | None = None


class _Asked(msgspec.Struct):
    """What a record names of a request refused before it was read as one: what it
    asks for (a tool's or prompt's name, a URI, a completion's reference) and its
    arguments."""

    name: str | None = None
    uri: str | None = None
    ref: _Ref | None = None
    arguments: Raw | UnsetType = UNSET

    def named(self) -> str | None:
        ref = self.ref
        return self.name or self.uri or (ref.name or ref.uri if ref is not None else None)


_asked: Final = msgspec.json.Decoder(_Asked)


class _Held(msgspec.Struct):
    """A call's record made while its answer waited to be written to an HTTP client."""

    record: CallRecord
    arguments: Raw | None
    unrouted: bool


class CallRecords:
    def __init__(self, audit: AuditLog, wall: Callable[[], float] = time.time) -> None:
        self.audit = audit
        # The wall clock, read as each call arrives and as it ends.
        self.now: Callable[[], float] = wall
        # The calls over HTTP whose answer is still to be written, and the record of
        # each once made: it waits to be told whether its agent was there to take it.
        self._held: dict[AgentCall, _Held | None] = {}

    @staticmethod
    def who(call: AgentCall) -> AgentInfo:
        """The agent as ``call``'s records name it: in the profile the call was routed
        in (the connection may have switched since)."""
        return call.agent.identity.info(call.profile, call.modern)

    def failed(self, call: AgentCall, exc: BaseException) -> None:
        """``call`` raised what nothing expected on its way (a fault in mcpd): its record
        says so, unless it has one already."""
        self.tool_call(call, self.who(call), *ended(exc))

    def held_until_written(self, call: AgentCall) -> AgentCall:
        """``call`` (over HTTP), whose record, once made, waits for ``release``."""
        self._held[call] = None
        return call

    def release(self, call: AgentCall, gone: bool) -> None:
        """Write the record of ``call`` held since ``held_until_written`` (one made
        later is written as it is made). ``gone``: its agent had gone, and its answer
        was not written, so the call is recorded as cancelled, as one whose agent hung
        up on the socket is, saying what the answer would have been."""
        if call not in self._held:
            return
        held = self._held.pop(call)
        if held is None:
            return
        record = held.record
        if gone and record.outcome != "cancelled":
            record.reason = f"{AGENT_GONE} (it was {record.outcome})"
            record.outcome = "cancelled"
        self._write(record, held.arguments, held.unrouted)

    def _write(self, record: CallRecord, raw: Raw | None, unrouted: bool) -> None:
        if unrouted and record.outcome in REFUSED_HERE:
            self.audit.unrouted(record, raw)
        else:
            self.audit.record(record, raw)

    def tool_call(
        self,
        call: AgentCall,
        agent: AgentInfo,
        outcome: AuditOutcome,
        reason: str | None = None,
        result_bytes: int = 0,
    ) -> None:
        """The record of ``call`` (once: a call recorded already is not again);
        ``reason``: a few words of mcpd's, or one ``outcome_of`` cut short."""
        if call.recorded:
            return
        call.recorded = True
        out = call.out
        arguments = out.arguments
        raw = None if arguments is UNSET else arguments
        alias = out.alias  # empty: not routed
        if not alias:
            # Ended where it was routed, before any rule: a name the agent's profile does
            # not have, a held one, arguments that are not an object, or search mode's
            # meta-tools. A held tool's name is the profile's; any other the agent may
            # have made up.
            server, original = call.held or (None, None)
            name = out.name if call.known else unknown(out.name)
        else:
            name, original, server = out.name, out.original, alias  # the profile's name
        record = CallRecord(
            ts=call.arrived,
            agent=agent,
            method="tools/call",
            name=name,
            original=original,
            server=server,
            args_bytes=0 if raw is None else len(raw),
            decision=call.decision,
            decided_by=call.decided_by,
            outcome=outcome,
            # mcpd's own refusal may quote a person's or an agent's words.
            reason=reason if call.refusal is None else kept(call.refusal),
            duration_ms=round((self.now() - call.arrived) * 1000, 3),
            result_bytes=result_bytes,
        )
        # Every call passes here: only an HTTP exchange's answer is ever held, so the
        # common case writes at once without a step of its own.
        held = self._held
        if held and call in held:
            held[call] = _Held(record, raw, not alias)
        elif alias:
            self.audit.record(record, raw)
        else:
            self._write(record, raw, True)

    def request(
        self,
        arrived: float,
        agent: AgentInfo,
        method: str,
        name: str | None,
        target: tuple[str, str] | None,
        outcome: AuditOutcome,
        reason: str | None,
        result_bytes: int,
        arguments: Raw | None = None,
        sent: bool = False,
    ) -> None:
        """The record of a prompts/get, resources/read or completion/complete:
        ``target`` its server and the server's name for what was asked (None: it
        named nothing mcpd could route); ``sent``: mcpd sent it on (no rule covers
        these: allowed by default), else it refused it itself and nobody decided."""
        if name is not None:
            name = unknown(name) if target is None else kept(name)
        record = CallRecord(
            ts=arrived,
            agent=agent,
            method=method,
            name=name,
            # The server's URI of an agent's mcpd:// form is the agent's as well.
            original=None if target is None else kept(target[1]),
            server=None if target is None else target[0],
            args_bytes=0 if arguments is None else len(arguments),
            decision="allow" if sent else NO_DECISION,
            decided_by="default" if sent else "",
            outcome=outcome,
            reason=None if reason is None else kept(reason),
            duration_ms=round((self.now() - arrived) * 1000, 3),
            result_bytes=result_bytes,
        )
        if sent or outcome not in REFUSED_HERE:
            self.audit.record(record, arguments)
        else:
            self.audit.unrouted(record, arguments)

    def turned_away(
        self, agent: Agent, request: splice.SplicedRequest | rpc.Request, why: str = ID_IN_USE
    ) -> None:
        """The record of a request the agent's connection refused before it started
        (``why``): its id was in use, or the agent was at its limit of requests in
        flight. Only the methods the audit log keeps have one, and it costs what the
        record of any call refused costs: what it names is read from the request at
        most once more."""
        method = request.method
        if method not in METHODS:
            return
        name: str | None
        if isinstance(request, splice.SplicedRequest):
            given: Raw | UnsetType = request.params.arguments
            name, arguments = request.params.name, None if given is UNSET else given
        else:
            try:
                asked = _asked.decode(request.params or b"{}")
            except (msgspec.DecodeError, RecursionError):
                asked = _Asked()
            given = asked.arguments
            name, arguments = asked.named(), None if given is UNSET else given
        info = agent.identity.info(agent.profile.name, agent.session.legacy_version is None)
        self.request(self.now(), info, method, name, None, "refused", why, 0, arguments)
