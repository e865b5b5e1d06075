"""tools/list and tools/call on the agent side: a call decoded into its ``Call``,
routed by the agent's profile, and the reply for each outcome.

A call is decoded once (``Router.call_of``, from what either decoder made of the
request) and routed once (``Router.route``): through the agent's profile, whose
search mode answers its own meta-tools, to a server and the tool's name there.
Started without a task (``Router.start``), its one outcome comes back to its caller,
the agent's connection, which writes the reply ``Router.reply`` makes. A call whose
server may ask its agent things, and every call over HTTP, is awaited in a task
instead (``Router.run``): the same call, driven through the rounds of asking back
(``relay.AskBack``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Final, NoReturn

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol import jsonrpc as rpc
from protocol import mcp, splice, surface
from protocol.server import RequestContext, ServerSession

from ..servers.askback import Asker
from ..servers.calls import Call, Outcome
from ..servers.outage import Outage
from ..servers.progress import Deliver
from .askback import AgentRequests, DirectAsker
from .backend import Backend, Servers
from .metatools import NAMES as META_TOOLS
from .paging import page
from .profiles import ProfileServers
from .relay import AgentSide, AskBack
from .results import shape_call_result
from .search_mode import unwrap

# How arguments that are an object, or null, begin.
_OBJECT_OR_NULL: Final = (ord("{"), ord("n"))
# Distinct _meta whose contexts one connection keeps: agents use one or two.
_KEPT: Final = 8
_metas: Final = msgspec.json.Decoder(dict[str, Any])

# The last step before a result is written, for a result that may hold links or task
# handles: (the call, its result, whether it may hold links) -> the result.
Finish = Callable[[Call, Raw | dict[str, Any], bool], Raw | dict[str, Any]]


class Agent(abc.ABC):
    """An agent's connection (or HTTP exchange), as its calls need it: the connection
    derives from this, which keeps it out of this module's imports."""

    session: ServerSession
    # The request contexts of the _meta it sends again and again, by those bytes.
    contexts: dict[bytes, RequestContext]
    profile: ProfileServers
    owner: object
    asks: AgentRequests  # what servers ask this agent through mcpd (a legacy agent)
    refuser: DirectAsker  # answers a server's request for an agent that declared none
    progress: Deliver

    @abc.abstractmethod
    def finish(self, call: Call, outcome: Outcome) -> None:
        """A call's one outcome (``servers.calls.Caller``)."""

    @abc.abstractmethod
    def send_nowait(self, data: bytes, rid: rpc.Id | None = None) -> None:
        """A message for the agent that answers none of its requests."""


def list_tools(
    servers: Servers, params: mcp.ListToolsParams, ctx: RequestContext | None, page_size: int
) -> mcp.ListToolsResult:
    servers.refresh()
    tools, after = page(servers.listing(), params.cursor, page_size)
    modern = ctx is not None and ctx.era == "modern"
    return mcp.ListToolsResult(
        tools=list(tools),
        nextCursor=UNSET if after is None else after,
        ttlMs=0 if modern else UNSET,
        cacheScope="private" if modern else UNSET,
        meta={"mcpd/servers": servers.states()},
    )


class Router:
    """Agents' calls, from their decoded requests to their servers, and their replies.

    ``splice`` says whether a call's request and reply may be written around the bytes
    they carry (``protocol.splice``); off, every call is encoded and checked as any
    other message is."""

    def __init__(
        self, servers: Backend, askback: AskBack, finish: Finish, *, budget: int, splice: bool
    ) -> None:
        self.servers = servers
        self.askback = askback
        self._finish = finish
        self.budget = budget  # daemon.result_budget_chars; set again on each reload
        self.splice = splice

    def call_of(self, agent: Agent, request: splice.Call | rpc.Request) -> Call:
        """The call an agent's tools/call stands for, from what either decoder made of
        it. Raises rpc.RPCError or rpc.InvalidParams for an envelope that is wrong."""
        meta: mcp.Meta | None = None
        responses: Raw | UnsetType = UNSET
        state: Raw | UnsetType = UNSET
        if isinstance(request, splice.Call):
            p = request.params
            name, arguments = p.name, p.arguments
            raw = p.meta
            ctx = agent.contexts.get(bytes(raw)) if raw is not UNSET else None
            if ctx is None:
                ctx, meta = _context(agent, raw)
        else:
            params = rpc.decode_as(request.params, mcp.CallToolParams)
            name, arguments = params.name, params.arguments
            responses, state = params.inputResponses, params.requestState
            whole = params.meta if isinstance(params.meta, dict) else None
            ctx = agent.session.context_of(whole)
            meta = _own(whole)
        modern = ctx.era == "modern"
        caps = ctx.capabilities if modern and ctx.capabilities else None
        return Call(
            request.id,
            name,
            arguments,
            agent,
            ctx,
            meta=meta,
            input_responses=responses,
            request_state=state,
            progress=agent.progress,
            asker=agent.refuser,
            owner=agent.owner,
            splice=self.splice,
            modern=modern,
            capabilities=caps,
            tasks=caps is not None and surface.has_tasks(caps),
        )

    def start(self, call: Call, agent: Agent) -> None:
        """Route ``call`` and start it at its server, without a task: its outcome goes
        to ``call.caller`` once, maybe before this returns."""
        refused = self.route(call, agent.profile)
        if refused is None:
            self.servers.start(call)
        else:
            call.caller.finish(call, refused)

    async def run(self, call: Call, agent: Agent) -> bytes:
        """``start``, awaited in a task of the agent's request: its reply, after as many
        rounds as its server and agent need to ask each other things."""
        refused = self.route(call, agent.profile)
        if refused is not None:
            return self.reply(call.id, call, refused)[0]
        side = AgentSide(
            owner=call.owner,
            modern=call.modern,
            capabilities=call.ctx.capabilities,
            requests=agent.asks,
            send=agent.send_nowait,
        )
        call.capabilities = side.upstream_capabilities()

        def shape(rid: rpc.Id, outcome: Outcome) -> bytes:
            return self.reply(rid, call, outcome)[0]

        return await self.askback.serve(
            side,
            call.id,
            "tools/call",
            call.local,
            call,
            call.request_state,
            call.input_responses,
            self._upstream,
            shape,
            _retry,
        )

    async def _upstream(self, call: Call, asker: Asker | None) -> Outcome:
        """One round of ``run``: the call at its server, awaited."""
        awaited = _Awaited()
        call.caller, call.asker = awaited, asker
        self.servers.start(call)
        try:
            return await awaited.outcome()
        except BaseException:
            call.cancel()
            raise

    def route(self, call: Call, profile: ProfileServers) -> Outcome | None:
        """Where ``call`` goes in the agent's profile: its server (``call.alias``) and
        the tool's name there; or the outcome it ends with here (arguments that are not
        an object, an unknown tool, what search mode's meta-tools answer)."""
        name = call.name
        if name in META_TOOLS:
            answered = unwrap(profile.view, call)
            if answered is not None:
                return answered
            name = call.name  # the call it stands for
        args = call.arguments
        if isinstance(args, Raw) and (not args or memoryview(args)[0] not in _OBJECT_OR_NULL):
            # Anything else used to reach the server as it was, and a server that
            # crashed on it took every other agent's calls down too.
            return rpc.RPCError(
                rpc.INVALID_PARAMS, "Invalid params: tools/call arguments must be an object"
            )
        entry = profile.lookup(name)
        if entry is None:
            return _unknown(profile, name)
        if entry.held is not None:
            # Refused where calls are routed: the server is not asked.
            why = entry.held
            result = mcp.text_result(held_text("tool", name, entry.alias, why), is_error=True)
            result.meta = held_meta(entry.alias, entry.original, why)
            return result
        call.local, call.name, call.alias = name, entry.original, entry.alias
        call.sight = profile.view
        return None

    def reply(self, rid: rpc.Id, call: Call, outcome: Outcome) -> tuple[bytes, bool]:
        """The reply line for ``outcome`` under the id ``rid``, and whether it was
        spliced around the server's result as it came (needing no check)."""
        if isinstance(outcome, Raw):
            result, links = shape_call_result(
                outcome,
                modern=call.modern,
                budget=self.budget,
                alias=call.alias,
                capabilities=call.capabilities,
                tasks=call.tasks,
            )
            if links or call.tasks:
                result = self._finish(call, result, links)
            if isinstance(result, Raw) and call.splice:
                return splice.reply(rid, result), True
            return rpc.encode_result(rid, result), False
        if isinstance(outcome, rpc.RPCError):
            return rpc.encode_error(rid, outcome.code, outcome.message, outcome.data), False
        own = outcome.result() if isinstance(outcome, Outage) else outcome
        if call.modern:
            own.resultType = mcp.COMPLETE
        return rpc.encode_result(rid, own), False


class _Awaited:
    """The caller of a call a task waits for."""

    __slots__ = ("_arrived", "_outcome")

    def __init__(self) -> None:
        self._arrived = trio.Event()
        self._outcome: Outcome | None = None

    def finish(self, call: Call, outcome: Outcome) -> None:
        self._outcome = outcome
        self._arrived.set()

    async def outcome(self) -> Outcome:
        await self._arrived.wait()
        assert self._outcome is not None
        return self._outcome


def _retry(call: Call, responses: Raw, state: Raw | UnsetType) -> Call:
    """The call again, with the answers to what its server asked and its state."""
    call.input_responses, call.request_state = responses, state
    return call


def _context(agent: Agent, raw: Raw | UnsetType) -> tuple[RequestContext, mcp.Meta | None]:
    """The context of a spliced call's ``_meta`` not seen before on this connection, and
    the agent's own keys in it. A ``_meta`` with none is kept: an agent sends the same
    one with nearly every call."""
    if raw is UNSET:
        return agent.session.context_of(None), None
    key = bytes(raw)
    try:
        meta = _metas.decode(raw)
    except msgspec.DecodeError:
        _refuse_meta(key)
    ctx = agent.session.context_of(meta)
    own = _own(meta)
    if own is None and len(agent.contexts) < _KEPT:
        agent.contexts[key] = ctx
    return ctx, own


def _own(meta: mcp.Meta | None) -> mcp.Meta | None:
    """The agent's own keys of a request's ``_meta`` (None: none): those passed on."""
    if not meta:
        return None
    own = {k: v for k, v in meta.items() if not k.startswith(mcp.RESERVED_META_PREFIX)}
    return own or None


def _refuse_meta(meta: bytes) -> NoReturn:
    # The words the general decoder has for it (the name and arguments were fine).
    rpc.decode_as(Raw(b'{"name":"","_meta":' + meta + b"}"), mcp.CallToolParams)
    raise rpc.InvalidParams("params._meta must be an object")


def _unknown(profile: ProfileServers, name: str) -> mcp.CallToolResult:
    down = profile.down_for(name)
    if down is not None:
        text = f"No tool {_clip(name)!r} is listed now. {down}"
    else:
        near = profile.closest(name)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        text = f"Unknown tool {_clip(name)!r}.{hint} Call tools/list for the current tools."
    return mcp.text_result(text, is_error=True)


def held_text(kind: str, local: str, alias: str, why: str) -> str:
    """What a model is told of a call to a held tool, prompt or template."""
    return (
        f"The {kind} {_clip(local)!r} of the server {alias!r} is held by mcpd: {why}. "
        "It was not called. Ask the user to review it (`mcpd tools --pending` shows what "
        f"changed); until it is approved, other {kind}s keep working."
    )


def held_meta(alias: str, original: str, why: str) -> dict[str, Any]:
    return {"mcpd/held": {"server": alias, "item": original, "reason": why}}


def _clip(name: str, limit: int = 200) -> str:
    """An unknown name as quoted back: a huge one would cost its size again in the reply."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
