"""prompts/list and prompts/get from an agent, and the ways of a prompts/get or a
resources/read whose server may ask the agent things.

Prompt names are local names (``registry.tables.prompts``); ``prompts/get`` reaches the
server under the server's own name, and its messages come back with their resource
URIs rewritten (``agents.calls.rewrite``). ``completion/complete`` is answered in
``completions``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext
from protocol.shown.visible import quote

from ...registry.uris.resources import Hold
from ...registry.uris.scheme import Sight
from ...servers.all_servers import AllServers
from ...servers.shared import Asker, CallRefused, Outage, Whose
from ..askback import unanswered, url_required
from ..askback.driver import AgentSide, AskBackDriver, Asked
from ..askback.rounds import RoundTrip, SendRound
from ..askback.state_bound import largest_state, refuse_too_large, repeated_bytes
from ..calls import result_eras
from ..calls.callrecords import Seen
from ..calls.result_bounds import error_within
from ..calls.rewrite import prompt_result
from ..calls.unrouted import held_meta, held_text
from ..lists.paging import page_of
from .prompt_bounds import check_arguments

OUTAGE: int = -32000

# What a prompts/get or resources/read comes to at its server: its result, why it could
# not be reached, its error, or mcpd's refusal of a round after the first (``Refused``).
Fetched = Raw | Outage | rpc.RPCError

# The params of a request that may be asked back about, as its server is sent them.
Params = TypeVar("Params", features.GetPromptParams, features.ReadResourceParams)


class PromptsPage(msgspec.Struct, omit_defaults=True):
    prompts: list[Raw]
    nextCursor: str | msgspec.UnsetType = UNSET
    resultType: str | msgspec.UnsetType = UNSET
    ttlMs: int | msgspec.UnsetType = UNSET
    cacheScope: str | msgspec.UnsetType = UNSET
    meta: mcp.Meta | msgspec.UnsetType = msgspec.field(name="_meta", default=UNSET)


class Refused(rpc.RPCError):
    """mcpd's refusal of a round after the first of a prompts/get or resources/read:
    what it names is no longer the agent's to get, as the first round would have said."""

    @classmethod
    def of(cls, error: rpc.RPCError) -> Refused:
        return cls(error.code, error.message, error.data)


def unknown_prompt(name: str) -> rpc.RPCError:
    return rpc.RPCError(rpc.INVALID_PARAMS, f"Unknown prompt {name[:200]!r}")


def outage_error(outage: Outage, own_user: bool) -> rpc.RPCError:
    """``outage`` as an agent of the daemon's own user or root (``own_user``) or of any
    other is told it (``Outage.for_agent``)."""
    told = outage.for_agent(own_user)
    return rpc.RPCError(OUTAGE, told.sentence(), {"mcpd/outage": told.meta()})


def held_error(kind: str, local: str, alias: str, original: str, why: str) -> rpc.RPCError:
    """A get or read of a held prompt or template, refused before the server is asked
    (with the error code an outage has: the item exists, and is unavailable)."""
    return rpc.RPCError(OUTAGE, held_text(kind, local, alias, why), held_meta(alias, original, why))


def held_read_error(asked: str, alias: str, uri: str, hold: Hold) -> rpc.RPCError:
    """A read of ``asked`` (``uri`` of ``alias``), a subscription to it or a completion
    for it, refused before the server is asked: its server is held whole, or a held
    template reads it, named by its URI template (no URI it reads spells it)."""
    if hold.template is None:
        return held_error("resource", asked, alias, uri, hold.why)
    return held_error("resource template", hold.template, alias, hold.template, hold.why)


Sees = Callable[[str, str], bool]  # (alias, prompt name or URI): the agent's profile admits it


def everything(alias: str, name: str) -> bool:
    return True


def list_prompts(
    servers: AllServers,
    params: mcp.ListParams,
    ctx: RequestContext | None,
    page_size: int,
    sees: Sees = everything,
) -> PromptsPage:
    prompts, after = page_of(servers.prompt_listing(sees), params.cursor, page_size, bytes)
    modern = ctx is not None and ctx.era == "modern"
    return PromptsPage(
        prompts=list(prompts),
        nextCursor=UNSET if after is None else after,
        ttlMs=0 if modern else UNSET,
        cacheScope="private" if modern else UNSET,
    )


def reply_for(
    servers: AllServers,
    alias: str,
    agent: AgentSide,
    outcome: Fetched,
    rewrite: Callable[[Raw], Raw | rpc.JsonObject],
    cacheable: bool = False,
    largest: int | None = None,
) -> Raw | rpc.JsonObject:
    """The shape of a prompts/get or resources/read reply for one outcome (``largest``:
    the largest state the agent may be handed, ``state_bound.largest_state``)."""
    if isinstance(outcome, Outage):
        raise outage_error(outcome, agent.own_user)
    if isinstance(outcome, rpc.RPCError):
        # A legacy server's ask to open a link, as this agent can take it.
        outcome = url_required.for_request(alias, outcome, agent.modern, agent.capabilities)
        if isinstance(outcome, rpc.RPCError):
            raise outcome
    head = rpc.decode_as(outcome, features.ResultHead)
    if head.kind == mcp.INPUT_REQUIRED:
        if agent.modern and (
            features.asks_nothing(head.inputRequests, head.requestState)
            or features.answerable(head.inputRequests, agent.capabilities)
        ):
            if largest is not None:
                refuse_too_large(alias, head.requestState, largest)
            return outcome
        raise rpc.RPCError(
            rpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"the server {alias!r} needs input this agent did not declare it can give",
            {unanswered.META_KEY: unanswered.asked(head.inputRequests)},
        )
    if head.kind != mcp.COMPLETE:
        raise rpc.RPCError(
            rpc.INTERNAL_ERROR,
            f"the server {alias!r} returned an unknown resultType {quote(str(head.kind))}",
        )
    shaped = result_eras.plain_for_era(
        rewrite(outcome),
        agent.modern,
        result_eras.LEGACY_NONE_READ if cacheable else result_eras.LEGACY_NONE,
    )
    if agent.modern:
        if isinstance(shaped, Raw):
            decoded = msgspec.json.decode(shaped)
            if not isinstance(decoded, dict):  # its head was read as one: never so here
                raise TypeError("the result is not a JSON object")
            shaped = decoded
        shaped["resultType"] = mcp.COMPLETE
        if cacheable:  # a read's result is one a modern client may cache: say how
            shaped.setdefault("ttlMs", 0)
            shaped.setdefault("cacheScope", "private")
    return shaped


def reply_encoded(
    rid: rpc.Id, make: Callable[[], object], failed: Callable[[rpc.RPCError], None]
) -> bytes:
    """``make()``'s result as a reply, or the error it came to as an error reply (its
    rpc.RPCError, or a result of the server's that cannot be read), told to ``failed``."""
    try:
        return rpc.encode_result(rid, make())
    except rpc.RPCError as exc:
        error = exc
    except (rpc.InvalidParams, msgspec.DecodeError, AttributeError, TypeError) as exc:
        error = rpc.RPCError(rpc.INTERNAL_ERROR, f"malformed result from the server: {exc}")
    failed(error)
    return rpc.encode_error(rid, error.code, error.message, error.data)


async def request_outcome(
    servers: AllServers,
    alias: str,
    method: str,
    params: msgspec.Struct,
    name: str,
    caps: rpc.JsonObject | None,
    asker: Asker | None,
    whose: Whose | None,
) -> Fetched:
    """A request to a server as an outcome (raw result, Outage or RPCError), weighed
    against ``whose``'s shares while under way."""
    try:
        return await servers.request(
            alias, method, params, name=name, capabilities=caps, asker=asker, whose=whose
        )
    except CallRefused as refused:
        return refused.outage
    except rpc.RPCError as exc:
        return exc


async def serve_asked(
    servers: AllServers,
    askback: AskBackDriver,
    agent: AgentSide,
    req: rpc.Request,
    params: Params,
    name: str,
    alias: str,
    upstream: SendRound[Params, Fetched],
    rewrite: Callable[[Raw], Raw | rpc.JsonObject],
    seen: Seen,
    arguments: Raw | UnsetType,
    budget: int,
    cacheable: bool = False,
) -> bytes:
    """The reply to ``req``, a prompts/get or resources/read of ``name`` (``params``, in
    the server's terms; a prompt's ``arguments``, a read has none) whose server
    ``alias`` may ask the agent things: what ``upstream`` comes to, its result made the
    agent's by ``rewrite``, noted in ``seen``; its error held to ``budget`` as a tool
    call's is (``error_within``)."""

    def shape(rid: rpc.Id, outcome: Fetched) -> bytes:
        if isinstance(outcome, Refused):
            seen.refusal = outcome
        else:
            seen.outcome = outcome

        def made() -> Raw:
            largest = largest_state(askback.max_line_bytes(), repeated_bytes(name, arguments))
            try:
                shaped = reply_for(servers, alias, agent, outcome, rewrite, cacheable, largest)
            except rpc.RPCError as exc:  # bounded once an ask to open a link is read
                raise error_within(exc, budget) from None
            if isinstance(shaped, Raw):
                return shaped  # the server's bytes, searched as they came
            return servers.written(alias, shaped, f"a {req.method} result")

        def failed(error: rpc.RPCError) -> None:
            # A result the agent got as an error is recorded as that error; an outage
            # or the server's own error is recorded as it came.
            if isinstance(outcome, Raw):
                seen.outcome = error

        return reply_encoded(rid, made, failed)

    def resend(p: Params, responses: Raw | UnsetType, state: Raw | UnsetType) -> Params:
        return msgspec.structs.replace(p, inputResponses=responses, requestState=state)

    asked = Asked(
        params, req.id, req.method, name, arguments, params.requestState, params.inputResponses
    )
    return await askback.serve(agent, asked, RoundTrip(send=upstream, shape=shape, resend=resend))


async def get_prompt(
    servers: AllServers,
    askback: AskBackDriver,
    agent: AgentSide,
    req: rpc.Request,
    budget: int,
    sees: Sees = everything,
    sight: Sight | None = None,
    seen: Seen | None = None,
) -> bytes:
    """``budget``: the result budget (``serve_asked``); ``seen``: filled in with what
    the request named and came to, for its record."""
    seen = seen or Seen()
    params = rpc.decode_as(req.params, features.GetPromptParams)
    local = seen.name = params.name
    given = params.arguments
    seen.arguments = given if isinstance(given, Raw) else None
    check_arguments(given)
    entry = servers.lookup_prompt(local)
    if entry is None or not sees(entry.alias, entry.name):
        raise unknown_prompt(local)
    seen.target = (entry.alias, entry.original)
    if entry.held is not None:
        raise held_error("prompt", local, entry.alias, entry.original, entry.held)
    alias, original = entry.alias, entry.original
    described = entry.prompt.description
    pinned = described if isinstance(described, str) else None
    params.name = original
    caps = agent.upstream_capabilities()
    rounds = 0

    async def upstream(p: features.GetPromptParams, asker: Asker | None) -> Fetched:
        # Sent again with the agent's answers, it is looked up again first: the prompt
        # may have left the agent's view, or been held, while the agent answered.
        nonlocal rounds
        rounds += 1
        if rounds > 1:
            now = servers.lookup_prompt(local)
            if (
                now is None
                or (now.alias, now.original) != (alias, original)
                or not sees(now.alias, now.name)
            ):
                return Refused.of(unknown_prompt(local))
            if now.held is not None:
                return Refused.of(held_error("prompt", local, alias, original, now.held))
        return await request_outcome(
            servers, alias, "prompts/get", p, p.name, caps, asker, agent.whose
        )

    def rewrite(raw: Raw) -> Raw | rpc.JsonObject:
        return prompt_result(raw, servers.links(alias, sight), alias, pinned)

    return await serve_asked(
        servers, askback, agent, req, params, local, alias, upstream, rewrite, seen, given, budget
    )
