"""How mcpd writes the requests it sends a server for agents: their ``_meta``, and a
tools/call's params and headers.

A modern server gets the envelope on every request: its protocol version, the
capabilities of the agent behind the request, mcpd's client info, the log level agents
want, and the agent's own keys; the reserved keys an agent sent are never passed on,
they are mcpd's to set. A legacy server gets only the agent's own keys. Most calls
carry nothing of the agent's own, so their ``_meta`` is the same every time: it is made
once, and so are the constant parts of such a tools/call (``protocol.jsonrpc.splice``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.mcp import core as mcp

from ..connected.handshake import NO_CAPABILITIES, RESERVED_META_PREFIX, client_meta
from .calls import Call

# The reserved keys every modern request carries: a _meta of only these is the
# common case, told in one set operation.
_ENVELOPE: Final = frozenset({mcp.KEY_PROTOCOL_VERSION, mcp.KEY_CLIENT_CAPABILITIES})


class CallMeta:
    """One server's ``_meta`` for agents' requests, for the era it speaks now."""

    def __init__(self) -> None:
        self.era: mcp.Era | None = None
        self.version = ""
        # A modern server sends log messages only for requests that carry a level.
        self._log_level: str | None = None
        self._plain: mcp.Meta | None = None
        # Per tool, the constant parts of its spliced requests (made by ``shape``).
        self.shapes: dict[str, splice.CallShape] = {}
        # Per tool, the Mcp-Param-* headers its arguments are mirrored into (HTTP).
        self.param_paths: dict[str, dict[str, mcp_headers.PropertyPath]] = {}

    def adopt(self, era: mcp.Era, version: str) -> None:
        self.era, self.version = era, version
        self._plain = None
        self.shapes.clear()

    @property
    def log_level(self) -> str | None:
        return self._log_level

    @log_level.setter
    def log_level(self, level: str | None) -> None:
        self._log_level = level
        self.shapes.clear()  # they hold the _meta, which carries the level

    def of(
        self, capabilities: Mapping[str, rpc.Json] | None, agent_meta: Mapping[str, object] | None
    ) -> mcp.Meta | UnsetType:
        """The ``_meta`` for a request of an agent's: the envelope (modern) or the agent's
        own keys without the reserved ones (legacy)."""
        if self.era == "modern":
            return self.envelope(capabilities, agent_meta)
        if agent_meta:
            kept = {k: v for k, v in agent_meta.items() if not k.startswith(RESERVED_META_PREFIX)}
            return kept if kept else UNSET
        return UNSET

    def envelope(
        self, capabilities: Mapping[str, rpc.Json] | None, agent_meta: Mapping[str, object] | None
    ) -> mcp.Meta:
        """A modern request's ``_meta``."""
        if self._log_level is not None:
            meta = client_meta(self.version, capabilities or NO_CAPABILITIES, agent_meta)
            meta[mcp.KEY_LOG_LEVEL] = self._log_level
            return meta
        if not capabilities and not _own_keys(agent_meta):
            # The common call carries nothing of the agent's own: one shared _meta
            # (encoded, never changed) instead of a new dict per call.
            if self._plain is None:
                self._plain = client_meta(self.version, NO_CAPABILITIES)
            return self._plain
        return client_meta(self.version, capabilities or NO_CAPABILITIES, agent_meta)

    def shape(self, name: str) -> splice.CallShape:
        """The constant parts of a call to ``name`` that carries nothing of the agent's."""
        shape = self.shapes.get(name)
        if shape is None:
            meta = rpc.encode(self.envelope(None, None)) if self.era == "modern" else None
            shape = self.shapes[name] = splice.CallShape(name, meta)
        return shape

    def params(self, call: Call) -> mcp.CallToolParams:
        """The call's params as the server gets them encoded: the era's ``_meta``, with
        mcpd's progress token in place of the agent's (none when nobody takes reports).
        A legacy server gets no ``inputResponses`` or ``requestState``: its era has no
        rounds of input."""
        own = call.meta
        if own is not None and mcp.KEY_PROGRESS_TOKEN in own:
            token = call.progress_token
            own = {
                k: token if k == mcp.KEY_PROGRESS_TOKEN else v
                for k, v in own.items()
                if k != mcp.KEY_PROGRESS_TOKEN or token is not None
            }
        modern = self.era == "modern"
        return mcp.CallToolParams(
            call.original,
            call.arguments,
            call.input_responses if modern else UNSET,
            call.request_state if modern else UNSET,
            meta=self.of(call.capabilities, own),
        )

    def param_headers(self, call: Call) -> dict[str, str] | None:
        """The Mcp-Param-* headers the call's arguments are mirrored into, if any (a
        modern server over HTTP); raises rpc.RPCError for a value no header can carry."""
        paths = self.param_paths.get(call.original) if self.era == "modern" else None
        if not paths:
            return None
        arguments: Any = None
        if isinstance(call.arguments, Raw):
            try:
                arguments = msgspec.json.decode(call.arguments)
            except msgspec.DecodeError:
                arguments = None
        try:
            return mcp_headers.param_headers(
                paths, arguments if isinstance(arguments, dict) else None
            )
        except mcp_headers.HeaderValueError as exc:
            raise rpc.RPCError(rpc.INVALID_PARAMS, str(exc)) from None


def _own_keys(meta: Mapping[str, object] | None) -> bool:
    """Whether ``meta`` holds a key of the agent's own (not a reserved one)."""
    if meta and not meta.keys() <= _ENVELOPE:
        for key in meta:
            if not key.startswith(RESERVED_META_PREFIX):
                return True
    return False
