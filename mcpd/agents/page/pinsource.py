"""Held definition changes on the page, from the daemon's pins (``Control.pins``): what
``mcpd approve`` shows and does, for the daemon's own user and root only, as on the
socket (``pinsapi``), and never for a page opened from an agent's side (``opener``).
A reader of one profile is shown nothing of them.

A change is shown as a unified diff of the definition as approved and as offered now,
each character a person could not see written out (``\\u200b``), since hidden text is
what a held change is most often about.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Awaitable, Callable
from typing import Any, Final

from protocol import jsonrpc as rpc
from protocol.visible import written_out

from ...policy.kin import AgentKin
from ...registry.judged import HELD_KINDS
from ...registry.judged import label as shown_label
from ...registry.views import ProfileView
from ..backend import Control
from .opener import Opener, check_release
from .sources import HeldChange, Sources

OWNER_ONLY: Final = "approving held changes is for the daemon's own user and root"
# Characters shown as they are; every other control or format character is written out.
_PLAIN: Final = frozenset("\n\t")


def pin_sources(control: Control, agents_kin: Callable[[], Awaitable[list[AgentKin]]]) -> Sources:
    """``agents_kin``: who is kin to each agent connected now (``ProfileMethods``)."""

    def held(scope: ProfileView | None) -> list[HeldChange] | None:
        if scope is not None:
            return None
        return [
            HeldChange(
                str(p["server"]),
                str(p["kind"]),
                str(p["name"]),
                str(p["reason"]),
                _diff(p),
                digest=str(p["digest"]),
            )
            for p in control.pins.pending()
        ]

    async def release(
        server: str, kind: str, name: str, digest: str, scope: ProfileView | None, opener: Opener
    ) -> str:
        if scope is not None:
            raise rpc.RPCError(-32000, OWNER_ONLY)
        check_release(opener, await agents_kin())
        picked = next((k for k in HELD_KINDS if k == kind), None)
        if picked is None:
            raise rpc.RPCError(-32000, f"{kind!r} is not a kind of item mcpd holds")
        label = shown_label(picked, name)
        try:
            result = await control.pins.approve(server, [(picked, name, digest)])
        except KeyError:
            raise rpc.RPCError(-32000, f"no server named {server!r}") from None
        if label in result.get("stale", []):
            raise rpc.RPCError(-32000, f"{label} of {server} changed again since; reload the page")
        if label in result.get("whole_only", []):
            raise rpc.RPCError(
                -32000,
                f"{label} of {server} is released with its server alone: run "
                f"`mcpd approve {server}`",
            )
        if label not in result.get("approved", []):
            raise rpc.RPCError(-32000, f"no {label} of {server} waits for approval")
        return f"{server}: {label} approved"

    return Sources(held=held, release=release)


def _diff(item: dict[str, Any]) -> str:
    before, after = _lines(item.get("approved")), _lines(item.get("offered"))
    label = "approved"
    if item.get("approved") is None:
        # A change of a pin kept by its digest alone: what was approved is not known.
        kept = item.get("why") not in ("changed", "forgotten")
        label = "(nothing approved)" if kept else "(approved, its definition not kept)"
    return "\n".join(difflib.unified_diff(before, after, label, "offered now", lineterm="", n=3))


def _lines(definition: Any) -> list[str]:
    if definition is None:
        return []
    dumped = json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)
    return [_shown(line) for line in dumped.split("\n")]


def _shown(text: str) -> str:
    return "".join(
        ch
        if ch in _PLAIN or unicodedata.category(ch)[0] not in "CZ" or ch == " "
        else written_out(ch)
        for ch in text
    )
