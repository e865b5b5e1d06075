"""A server's ``tools/list``, page by page, made into the tools agents may be shown.

No I/O here: ``Upstream.list_tools`` asks for each page at ``ToolPages.cursor`` and
feeds its result to ``ToolPages.feed`` until it says the list is over; ``result``
then makes the tools of it. The items' bytes are hashed as they come, so a list the
server sends again as it was is not decoded again: a refresh of many unchanged tools
would otherwise decode and compare them all, with both copies in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec
from msgspec import Raw

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import greeting
from protocol.shown.visible import quote

from ...config.tables.model import ListLimits
from ...policy.redaction.guard import SecretGuard
from ...registry.gating.limits import LISTED_TWICE, ListTrim, Trimmed, short_name
from ...server_row import ServerInfo
from ..connected import handshake
from ..connected.handshake import BadPage
from ..results.taking_apart import too_complex
from . import toolshape


class ListResult(msgspec.Struct):
    tools: list[mcp.Tool]
    ttl_ms: int
    dropped: list[str]  # tools left out, each with why
    # "private": the list belongs to the authorization context it was fetched in,
    # which is mcpd's own (its credentials for this server), never an agent's.
    cache_scope: str | None = None
    # The server sent the bytes it sent last time in this session: ``tools`` is the
    # list decoded then, not decoded again.
    unchanged: bool = False
    cut: list[str] = msgspec.field(default_factory=list)  # tools kept with less, and why
    short: bool = False  # the list was longer than its limits: only its first part is here
    # Seconds of mcpd's thread fetching it took (``Upstream.list_tools``).
    cost: float = 0.0


class FetchCost:
    """What one fetch of a list cost mcpd so far, in seconds of the thread every server
    and agent shares: the work done on its pages (``working``), what the server's own
    thread took to take them apart (``taken``) and what the transport took to read
    them (``read``), counted from ``begin``, whether the fetch ends in a list or not."""

    def __init__(
        self, clock: Callable[[], float], read: Callable[[], float], taken: Callable[[], float]
    ) -> None:
        self._clock, self._read, self._taken = clock, read, taken
        self._worked = self._read_before = self._taken_before = 0.0

    def begin(self) -> None:
        self._worked = 0.0
        self._read_before, self._taken_before = self._read(), self._taken()

    @contextmanager
    def working(self) -> Iterator[None]:
        began = self._clock()
        try:
            yield
        finally:
            self._worked += self._clock() - began

    @property
    def seconds(self) -> float:
        read = self._read() - self._read_before
        return self._worked + self._taken() - self._taken_before + read


class LastListing(msgspec.Struct, frozen=True):
    """What the last list was: a digest of its items' bytes, and what was made of them."""

    digest: bytes
    tools: list[mcp.Tool]
    trimmed: Trimmed


class ToolPages:
    def __init__(
        self, alias: str, limits: ListLimits, max_pages: int, guard: SecretGuard | None = None
    ) -> None:
        """``guard``: what each tool is searched with as mcpd writes it again for agents
        (``SecretGuard.reread``), once the list changed."""
        self.alias = alias
        self._guard = guard
        self.max_pages = max_pages
        self.cursor: str | None = None  # the page to ask for next (None: the first)
        # Who the server says it is in a page's _meta (not only discover's result).
        self.server_info: ServerInfo | None = None
        self._trim = ListTrim(alias, "tools", "tools/list", limits)
        self._items: list[Raw] = []
        self._digest = hashlib.blake2b(digest_size=16)
        self._seen: set[str] = set()
        self._pages = 0
        self._ttl = 0
        self.ttl_wrong: str | None = None  # what is wrong with the list's ttlMs
        self._scope: str | None = None

    def feed(self, raw: Raw) -> bool:
        """Take one page's result; whether there is another to ask for (at ``cursor``).
        Raises BadPage for a page that is no list, a cursor given twice, or a
        list still going at ``max_pages``, or too many values to read."""
        many = too_complex(self.alias, raw, "a tools/list page", "list its tools")
        if many is not None:
            raise BadPage(many)
        try:
            page = rpc.decode_as(raw, mcp.ListToolsPage)
        except rpc.InvalidParams as exc:
            raise BadPage(f"{self.alias}: bad tools/list result: {exc}") from None
        trim = self._trim
        if self._pages == 0:
            self._ttl, self.ttl_wrong = mcp.ttl_of(page.ttlMs)
            self._scope = page.cacheScope if isinstance(page.cacheScope, str) else None
        self._pages += 1
        if self.server_info is None:
            self.server_info = handshake.identity(greeting.server_info(page.meta))
        tools = page.tools
        for at, item in enumerate(tools):
            if trim.admit(item):
                self._digest.update(item)
                self._digest.update(b"\n")  # no two lists of items hash alike by joining
                self._items.append(item)
            elif trim.full:
                trim.pass_over(len(tools) - at - 1)
                break
        nxt = page.nextCursor
        if isinstance(nxt, str) and trim.full:
            trim.stopped()
        if not isinstance(nxt, str) or trim.full:
            self._digest.update(trim.signature())
            return False
        if nxt in self._seen:
            raise BadPage(f"{self.alias}: tools/list cursor {quote(nxt)} repeated")
        if self._pages >= self.max_pages:
            raise BadPage(f"{self.alias}: tools/list did not end after {self.max_pages} pages")
        self._seen.add(nxt)
        self.cursor = nxt
        return True

    def result(
        self,
        last: LastListing | None,
        param_paths: dict[str, dict[str, mcp_headers.PropertyPath]] | None,
    ) -> tuple[ListResult, LastListing]:
        """The tools of the pages fed, and what the next list is compared with: the
        ``last`` one's tools again when the bytes are the same (``unchanged``).
        ``param_paths``: where an HTTP server's tools name headers, made again of the
        tools kept (the first of a name listed twice), each checked."""
        digest = self._digest.digest()
        if last is not None and last.digest == digest:
            was = last.trimmed
            again = ListResult(
                last.tools,
                self._ttl,
                was.dropped,
                self._scope,
                unchanged=True,
                cut=was.cut,
                short=was.short,
            )
            return again, last
        trim = self._trim
        tools: list[mcp.Tool] = []
        names: set[str] = set()
        headers: dict[str, dict[str, mcp_headers.PropertyPath]] = {}
        guard = self._guard
        for item in self._items:
            if guard is not None:
                item = guard.reread(self.alias, item, "a tools/list result")
            tool = toolshape.accepted(item, trim)
            if tool is None:
                continue
            if guard is not None and toolshape.named_a_secret(guard, self.alias, tool.name, trim):
                continue
            if tool.name in names:
                # A name is how calls find a tool: a second one could never be called.
                trim.drop(short_name(tool.name), LISTED_TWICE)
                continue
            if param_paths is not None:
                paths = toolshape.header_paths(tool, trim)
                if paths is None:
                    continue
                if paths:
                    headers[tool.name] = paths
            names.add(tool.name)
            trim.described(tool)
            tools.append(tool)
        if param_paths is not None:
            # Only this list's kept tools: none of a tool no longer listed outlives it.
            param_paths.clear()
            param_paths.update(headers)
        trimmed = trim.done()
        fresh = ListResult(
            tools, self._ttl, trimmed.dropped, self._scope, cut=trimmed.cut, short=trimmed.short
        )
        return fresh, LastListing(digest, tools, trimmed)
