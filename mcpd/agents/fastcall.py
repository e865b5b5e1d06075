"""The agent side of the tools/call splice (``protocol.splice``): a call's params and
request context from its spliced decode.

An agent sends the same ``_meta`` with nearly every call (its protocol version and
capabilities). Its context is worked out once per connection and kept by the bytes of
that ``_meta``; such a call then goes upstream with nothing of the agent's ``_meta``,
which is what lets its server's side splice the request; so does one whose only key of
the agent's own is a progress token, which goes on alone. Any other ``_meta`` is decoded
for each call and passed on with it.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn, Protocol

import msgspec
from msgspec import UNSET, Raw

from protocol import jsonrpc as rpc
from protocol import mcp, splice
from protocol.server import RequestContext, ServerSession

# Distinct _meta whose contexts one connection keeps: agents use one or two.
_KEPT: Final = 8
_metas: Final = msgspec.json.Decoder(dict[str, Any])


class Agent(Protocol):
    session: ServerSession
    contexts: dict[bytes, RequestContext]


def params_and_context(
    agent: Agent, call: splice.Call
) -> tuple[mcp.CallToolParams, RequestContext]:
    """Raises rpc.RPCError or rpc.InvalidParams as the general path would."""
    p = call.params
    raw = p.meta
    if raw is UNSET:
        return mcp.CallToolParams(p.name, p.arguments), agent.session.context_of(None)
    key = bytes(raw)
    ctx = agent.contexts.get(key)
    if ctx is not None:
        return mcp.CallToolParams(p.name, p.arguments), ctx
    try:
        meta = _metas.decode(raw)
    except msgspec.DecodeError:
        _refuse_meta(key)
    ctx = agent.session.context_of(meta)
    own = [k for k in meta if not k.startswith(mcp.RESERVED_META_PREFIX)]
    if not own:
        # No progress token and nothing of the agent's own: the context is all there is.
        if len(agent.contexts) < _KEPT:
            agent.contexts[key] = ctx
        return mcp.CallToolParams(p.name, p.arguments), ctx
    if own == [mcp.KEY_PROGRESS_TOKEN]:
        # Only the token goes on (as mcpd's own): the request can still be spliced.
        token = {mcp.KEY_PROGRESS_TOKEN: meta[mcp.KEY_PROGRESS_TOKEN]}
        return mcp.CallToolParams(p.name, p.arguments, meta=token), ctx
    return mcp.CallToolParams(p.name, p.arguments, meta=meta), ctx


def _refuse_meta(meta: bytes) -> NoReturn:
    # The words the general decoder has for it (the name and arguments were fine).
    rpc.decode_as(Raw(b'{"name":"","_meta":' + meta + b"}"), mcp.CallToolParams)
    raise rpc.InvalidParams("params._meta must be an object")
