"""What a tools/call's ``_meta`` stands for: the request context it gives the call
(the agent's era and capabilities), and the agent's own keys in it, passed on to the
server. A spliced call's ``_meta`` comes as bytes: its context is kept per connection
by those bytes, since an agent sends the same one with nearly every call.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ..agent import Agent

# Distinct _meta whose contexts one connection keeps: agents use one or two, small;
# one far larger than any host's is read each time, not kept.
_KEPT: Final = 8
_KEPT_BYTES: Final = 8 * 1024
_metas: Final = msgspec.json.Decoder(dict[str, Any])


def spliced_context(agent: Agent, raw: Raw | UnsetType) -> tuple[RequestContext, mcp.Meta | None]:
    """The context of a spliced call's ``_meta`` not seen before on this connection, and
    the agent's own keys in it. A ``_meta`` with none is kept: an agent sends the same
    one with nearly every call."""
    if raw is UNSET:
        return agent.session.context_of(None), None
    key = bytes(raw)
    try:
        meta = _metas.decode(raw)
    except msgspec.DecodeError:
        _refuse(key)
    ctx = agent.session.context_of(meta)
    own = agents_own(meta)
    if own is None and len(agent.contexts) < _KEPT and len(key) <= _KEPT_BYTES:
        agent.contexts[key] = ctx
    return ctx, own


def agents_own(meta: mcp.Meta | None) -> mcp.Meta | None:
    """The agent's own keys of a request's ``_meta`` (None: none): those passed on."""
    if not meta:
        return None
    own = {k: v for k, v in meta.items() if not k.startswith(mcp.RESERVED_META_PREFIX)}
    return own or None


def _refuse(meta: bytes) -> NoReturn:
    # The words the general decoder has for it (the name and arguments were fine).
    rpc.decode_as(Raw(b'{"name":"","_meta":' + meta + b"}"), mcp.CallToolParams)
    raise rpc.InvalidParams("params._meta must be an object")
