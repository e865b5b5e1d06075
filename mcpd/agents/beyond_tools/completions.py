"""completion/complete from an agent: sent to the server of the prompt it names, or of
the resource template it names, in the server's terms; its values capped
(``prompt_bounds.capped_completion``)."""

from __future__ import annotations

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

from ...registry.uris.resources import Hold
from ...registry.uris.scheme import Ambiguous, Sight
from ...servers.all_servers import AllServers
from ...servers.shared import CallRefused, Whose
from ..calls import result_eras
from ..calls.callrecords import Seen
from ..calls.result_bounds import error_within
from .prompt_bounds import capped_completion
from .prompts import Sees, everything, held_error, held_read_error, outage_error, unknown_prompt


async def complete(
    servers: AllServers,
    req: rpc.Request,
    ctx: RequestContext | None,
    sees_prompt: Sees = everything,
    sight: Sight | None = None,
    seen: Seen | None = None,
    *,
    own_user: bool = False,
    whose: Whose | None = None,
    budget: int,
) -> Raw:
    """``seen``: filled in with what the request named and came to, for its record;
    ``own_user``: the agent is the daemon's own user's or root's (``outage_error``);
    ``whose``: whose shares of the bytes under way it is weighed against; ``budget``:
    the result budget, which the server's error is held to (``error_within``)."""
    seen = seen or Seen()
    params = rpc.decode_as(req.params, features.CompleteParams)
    seen.arguments = params.argument
    ref = params.ref
    if ref.type == "ref/prompt" and isinstance(ref.name, str):
        seen.name = ref.name
        entry = servers.lookup_prompt(ref.name)
        if entry is None or not sees_prompt(entry.alias, entry.name):
            raise unknown_prompt(ref.name)
        seen.target = (entry.alias, entry.original)
        if entry.held is not None:
            raise held_error("prompt", ref.name, entry.alias, entry.original, entry.held)
        alias = entry.alias
        params.ref = msgspec.structs.replace(ref, name=entry.original)
    elif ref.type == "ref/resource" and isinstance(ref.uri, str):
        seen.name = ref.uri
        found = _template(servers, ref.uri, sight)
        seen.target = found
        why = servers.held_template(*found)
        if why is not None:
            raise held_read_error(ref.uri, *found, Hold(why, found[1]))
        alias = found[0]
        params.ref = msgspec.structs.replace(ref, uri=found[1])
    else:
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"Unsupported completion reference {ref.type!r}")
    caps = ctx.capabilities if ctx is not None and ctx.era == "modern" else None
    try:
        raw = await servers.request(
            alias, "completion/complete", params, capabilities=caps, whose=whose
        )
    except CallRefused as refused:
        seen.outcome = refused.outage
        raise outage_error(refused.outage, own_user) from None
    except rpc.RPCError as exc:
        seen.outcome = exc
        raise error_within(exc, budget) from None
    seen.outcome = raw
    modern = ctx is not None and ctx.era == "modern"
    cut = capped_completion(raw)
    decoded = result_eras.plain_for_era(raw if cut is None else cut, modern)
    if isinstance(decoded, Raw) and not modern:
        return decoded
    if isinstance(decoded, Raw):
        decoded = msgspec.json.decode(decoded)
    if isinstance(decoded, dict):
        if modern:
            decoded.setdefault("resultType", mcp.COMPLETE)
        return servers.written(alias, decoded, "a completion/complete result")
    return raw


def _template(servers: AllServers, named: str, sight: Sight | None) -> tuple[str, str]:
    """(alias, the server's template) a completion's ``ref/resource`` names: a template
    only, as ``ResourceRoutes.template_route`` finds it; never a URI matched against
    the servers' templates (another server's catch-all would take it)."""
    found = servers.route_template(named, sight)
    if isinstance(found, Ambiguous):
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"{len(found.candidates)} servers have the resource template {named[:200]!r};"
            " complete one of " + ", ".join(found.candidates),
            {"uri": named, "candidates": found.candidates},
        )
    if found is None or (sight is not None and not sight.admits_resource(*found)):
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"Unknown resource template {named[:200]!r}: name one as resources/templates/list"
            " gives it",
            {"uri": named},
        )
    return found
