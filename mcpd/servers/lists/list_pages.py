"""Every page of a server's prompts, resources or resource templates, each item
decoded and held to the server's limits on its own."""

from __future__ import annotations

from typing import Any, TypeVar

from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.visible import quote

from ...registry.gating.limits import LISTED_TWICE, ListTrim, Trimmed, item_label
from ..connected.handshake import BadPage
from ..connected.upstream import Upstream
from ..results.taking_apart import too_complex
from .toolshape import named_a_secret

T = TypeVar("T", features.Prompt, features.Resource, features.ResourceTemplate)


async def list_all(
    up: Upstream, method: str, field: str, type_: type[T], kind: str
) -> tuple[list[T], Trimmed]:
    """Every page of a list method up to the server's limits, each item decoded on its
    own (a bad item is dropped, as a bad tool is), and what was left out."""
    out: list[T] = []
    keys: set[str] = set()
    seen: set[str] = set()
    cursor: str | None = None
    trim = ListTrim(up.alias, kind, method, up.limits)
    for _ in range(up.max_pages):
        meta = up.meta.of(None, None)
        params: Any = (
            mcp.ListParams(cursor=UNSET if cursor is None else cursor, meta=meta)
            if cursor is not None or meta is not UNSET
            else UNSET
        )
        raw = await up.request(method, params)
        many = too_complex(up.alias, raw, f"a {method} page", f"list its {trim.what}")
        if many is not None:
            raise BadPage(many)
        try:
            page = rpc.decode_as(raw, features.ListPage)
        except rpc.InvalidParams as exc:
            raise BadPage(f"{up.alias}: bad {method} result: {exc}") from None
        items = {
            "prompts": page.prompts,
            "resources": page.resources,
            "resourceTemplates": page.resourceTemplates,
        }[field]
        items = items if isinstance(items, list) else []
        for at, item in enumerate(items):
            if not trim.admit(item):
                if trim.full:
                    trim.pass_over(len(items) - at - 1)
                    break
                continue
            # Read and written anew for agents: searched as written.
            item = up.guard.reread(up.alias, item, f"a {method} result")
            try:
                decoded = rpc.decode_as(item, type_)
            except rpc.InvalidParams as exc:
                trim.drop("(malformed)", str(exc))
                continue
            if not trim.addressable(decoded):
                continue
            if isinstance(decoded, features.Prompt) and named_a_secret(
                up.guard, up.alias, decoded.name, trim
            ):
                continue
            key = _key(decoded)
            if key in keys:
                trim.drop(item_label(decoded), LISTED_TWICE)
                continue
            keys.add(key)
            trim.described(decoded)
            out.append(decoded)
        nxt = page.nextCursor
        if isinstance(nxt, str) and trim.full:
            trim.stopped()
        if not isinstance(nxt, str) or trim.full:
            return out, trim.done()
        if nxt in seen:
            raise BadPage(f"{up.alias}: {method} cursor {quote(nxt)} repeated")
        seen.add(nxt)
        cursor = nxt
    raise BadPage(f"{up.alias}: {method} did not end after {up.max_pages} pages")


def _key(item: features.Prompt | features.Resource | features.ResourceTemplate) -> str:
    """What names an item to agents and to the server."""
    if isinstance(item, features.Resource):
        return item.uri
    if isinstance(item, features.ResourceTemplate):
        return item.uriTemplate
    return item.name
