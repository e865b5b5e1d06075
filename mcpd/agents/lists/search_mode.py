"""The "search" discovery mode: what ``tools/list`` holds, and the meta-tools' calls.

In search mode an agent is listed the three meta-tools of ``metatools`` and the
profile's pinned tools. ``mcpd_search_tools`` and ``mcpd_describe_tools`` are answered
here from the profile's view; ``mcpd_call_tool`` is unwrapped into the ``tools/call``
it stands for (the same ``_meta``, progress token, ``inputResponses`` and
``requestState``), which then takes the very path a direct call takes: routing,
breaker, time limits, budget, progress, cancellation and input_required are not
repeated here, they are the same code. The meta-tools answer in every profile whose
discovery is not "all", also while "auto" lists everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ...registry.profiles.views import ProfileView
from ...registry.tables.table import ListedTool
from ...servers.shared import Call
from . import metatools

_encode: Final = msgspec.json.Encoder().encode
_decode_tool: Final = msgspec.json.Decoder(dict[str, Any])


def exposed_listing(view: ProfileView) -> Sequence[ListedTool]:
    """``tools/list`` for the view's agents."""
    if view.mode == "all":
        return view.listing()
    defs: list[ListedTool] = list(metatools.meta_tools(view.servers(), total=view.count()))
    return defs + view.pinned()


def unwrap(view: ProfileView, call: Call) -> mcp.CallToolResult | None:
    """A meta-tool's call, in the view's search mode: what a search or a describe
    answers (or a meta-call with arguments it cannot use); or None, with ``call`` made
    the call a meta-call stands for (or left as it is, where the mode is "all")."""
    name = call.name
    if name not in metatools.NAMES or view.profile.discovery == "all":
        return None
    try:
        if name == metatools.SEARCH:
            return _search(view, call.arguments)
        if name == metatools.DESCRIBE:
            return _describe(view, call.arguments)
        target, arguments = metatools.parse_call(_arguments(call.arguments))
    except metatools.ArgumentError as exc:
        return metatools.error_result(str(exc))
    call.name, call.arguments = target, Raw(_encode(arguments))
    return None


def _arguments(raw: Raw | Any) -> Raw | None:
    return raw if isinstance(raw, Raw) else None


def _search(view: ProfileView, arguments: Raw | Any) -> mcp.CallToolResult:
    args = metatools.parse_search(_arguments(arguments))
    hits = view.search(args.query, args.limit)
    entries = [view.lookup(hit.name) for hit in hits]
    held = {e.local: f"held: {e.held}" for e in entries if e is not None and e.held is not None}
    return metatools.search_result(
        args.query, hits, total=view.count(), markers=view.markers(), held=held
    )


def _describe(view: ProfileView, arguments: Raw | Any) -> mcp.CallToolResult:
    names = metatools.parse_describe(_arguments(arguments))
    found: list[dict[str, Any]] = []
    unknown: list[str] = []
    for name in names:
        entry = view.lookup(name)
        if entry is None:
            unknown.append(name)
        else:
            found.append(_decode_tool.decode(rpc.encode(entry)))
    return metatools.describe_result(found, unknown)
