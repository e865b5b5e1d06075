"""What one server's lists may hold: how many items, how many bytes, how long a text.

Nothing else bounds what a server lists but its pages times the line size, and all of
it goes into memory, into agents' context and into the state file. So each list is
read against the server's limits (``Config.list_limits``) as its pages arrive: past
the number of items or bytes a list may hold, the rest is dropped and no further page
is asked for; an item too big on its own is dropped; a description or the server's
instructions past their size are cut at a character boundary, with a marker saying
so. This happens before the registry and the state file see the list. What was left
out and why, with the invalid items the other checks drop, is kept for ``mcpd
status`` and said in one warning per list fetched, not one per item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.uri_templates import MAX_URI
from protocol.shown.logfields import log_extra
from protocol.shown.visible import visible

from ...config.tables.model import Config, Limit, ListLimits
from ..text.clean import clean_text

logger = logging.getLogger("mcpd.server")

ListedItem: TypeAlias = mcp.Tool | features.Prompt | features.Resource | features.ResourceTemplate
T = TypeVar("T", mcp.Tool, features.Prompt, features.Resource, features.ResourceTemplate)

DEFAULT_LIMITS: Final = Config().list_limits("")
_IN_LOG: Final = 3  # reasons one warning names; ``mcpd status`` has them all
_NAME_SHOWN: Final = 60  # characters of a server's name for an item, in a reason
_REASON_SHOWN: Final = 300  # characters of a reason (some quote what the server sent)
# Why a later item of one name (a resource's URI, a template's) is left out: what an
# agent was shown under a name is what it gets, whatever page a server lists it on.
LISTED_TWICE: Final = "listed twice (the first one listed is kept)"
# Why a resource or a template is left out whose URI holds what cleaning takes out: the
# URI is how it is read, so it cannot be cleaned, and a model must not read it as it is.
HIDDEN_URI: Final = "its URI holds invisible or control characters"
# Why a tool or a prompt without a name is left out: it is called by its name, which
# MCP gives at least one character, and an empty one makes a local name of the
# template alone (or nothing at all).
NO_NAME: Final = "its name is empty"
NO_URI: Final = "its URI is empty"
# Why a resource or a template is left out whose URI is longer than any URI mcpd matches
# a template against: every spelling of it a profile's patterns are held against is
# read through, and agents could not route it back anyway.
LONG_URI: Final = f"its URI is longer than {MAX_URI:,} characters"
# How many characters the URIs of one list may hold in all: a profile's patterns read
# each whole, in every spelling, on the loop, once a version of the list, so this
# bounds what one list costs to judge, whatever its items' count and sizes.
LISTED_URI_CHARS: Final = 64 * MAX_URI
URIS_FULL: Final = f"the list's URIs reached {LISTED_URI_CHARS:,} characters in all"
# Why a tool or a prompt is left out whose local name would hold a secret mcpd holds
# that its name as the server spelled it does not (``ghp.R7k`` made ``ghp_R7k``): no
# agent may be handed the secret, and a name cannot be masked and still call the item.
NAMED_A_SECRET: Final = "the name agents would know it by holds a secret mcpd holds"


def first_listed(items: Sequence[T], key: Callable[[T], str]) -> list[T]:
    """``items`` with each name (``key``) once, as first listed (``LISTED_TWICE``)."""
    kept: dict[str, T] = {}
    for item in items:
        kept.setdefault(key(item), item)
    return list(kept.values())


class Trimmed(msgspec.Struct):
    """What one fetch of a list left out: items dropped and texts cut, each with why,
    and how many items were dropped past the list's limits (``unread``: and pages the
    server offered past them were not fetched)."""

    dropped: list[str] = msgspec.field(default_factory=list)
    cut: list[str] = msgspec.field(default_factory=list)
    past: int = 0
    unread: bool = False

    @property
    def short(self) -> bool:
        """Whether the list was cut short by its limits."""
        return self.past > 0 or self.unread


class _Named(msgspec.Struct):
    name: object = UNSET
    uri: object = UNSET
    uriTemplate: object = UNSET


_named: Final = msgspec.json.Decoder(_Named)


def short_name(name: object) -> str:
    """A server's name for an item, kept short, for a reason."""
    if not isinstance(name, str):
        return "(unnamed)"
    return name if len(name) <= _NAME_SHOWN else name[: _NAME_SHOWN - 3] + "..."


def item_label(item: ListedItem) -> str:
    if isinstance(item, features.Resource):
        return short_name(item.uri)
    if isinstance(item, features.ResourceTemplate):
        return short_name(item.uriTemplate)
    return short_name(item.name)


def _short(reason: str) -> str:
    return reason if len(reason) <= _REASON_SHOWN else reason[: _REASON_SHOWN - 3] + "..."


def _raw_label(item: Raw) -> str:
    try:
        named = _named.decode(item)
    except (msgspec.DecodeError, RecursionError):
        return "(an item)"
    for value in (named.name, named.uri, named.uriTemplate):
        if isinstance(value, str):
            return short_name(value)
    return "(an item)"


def cut_text(text: str, limit: int) -> tuple[str, int] | None:
    """``text`` kept to at most ``limit`` UTF-8 bytes, cut where a character ends and
    marked, and how many bytes it had; None when it fits."""
    if len(text) <= limit // 4:  # at most 4 bytes a character
        return None
    data = text.encode()
    if len(data) <= limit:
        return None
    # A character cut in two at the end is left out whole.
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept} [mcpd: cut at {limit:,} of {len(data):,} bytes]", len(data)


# What each list holds, in reasons: (many, one).
NOUNS: Final = {
    "tools": ("tools", "tool"),
    "prompts": ("prompts", "prompt"),
    "resources": ("resources", "resource"),
    "resource_templates": ("resource templates", "resource template"),
}


class ListTrim:
    """One fetch of one list (a ``NOUNS`` key), read against the server's limits;
    ``source`` says where it came from in the warning ("tools/list")."""

    def __init__(self, alias: str, kind: str, source: str, limits: ListLimits) -> None:
        self.alias = alias
        self.what, self.one = NOUNS[kind]
        self.source = source
        self.limits = limits
        self.trimmed = Trimmed()
        self.read = 0  # items taken in turn (kept, or dropped one by one)
        self._bytes = 0
        self._uri_chars = 0  # of the URIs kept
        self._stop: Limit | None = None  # the list's limit that was reached

    @property
    def full(self) -> bool:
        """Whether no later item can be kept: no further page is worth asking for."""
        return self._stop is not None or self.read >= self.limits.items.value

    def admit(self, item: Raw) -> bool:
        """Whether to decode the next item the list holds: not past a limit of the
        list (nor any item after it), nor one too big on its own."""
        return self.admit_size(len(item), lambda: _raw_label(item))

    def pass_over(self, count: int) -> None:
        """The last ``count`` items of a page once the list is ``full``: each left out
        as ``admit`` would leave it out, without a look at any."""
        if self._stop is None:
            self._stop = self.limits.items
        self.trimmed.past += count

    def admit_decoded(self, item: ListedItem) -> bool:
        """``admit`` for an item already decoded (as saved), measured as encoded."""
        return self.admit_size(len(msgspec.json.encode(item)), lambda: item_label(item))

    def admit_size(self, size: int, name: Callable[[], str]) -> bool:
        if self._stop is None:
            items, total = self.limits.items, self.limits.list_bytes
            if self.read >= items.value:
                self._stop = items
            elif self._bytes + size > total.value:
                self._stop = total
        if self._stop is not None:
            self.trimmed.past += 1
            return False
        self.read += 1
        big = self.limits.item_bytes
        if size > big.value:
            self.drop(name(), f"{size:,} bytes, over the limit of {big.value:,} ({big.key})")
            return False
        self._bytes += size
        return True

    def drop(self, name: str, reason: str) -> None:
        """An item left out: ``name`` as ``item_label`` gives it (or a word in brackets)."""
        self.trimmed.dropped.append(_short(f"{name}: {reason}"))

    def addressable(self, item: ListedItem) -> bool:
        """Whether the item can be asked for by what names it: not a tool or a prompt
        whose name is empty (``NO_NAME``), nor a resource or a template whose URI is
        empty (``NO_URI``), too long (``LONG_URI``, ``URIS_FULL``) or holds what
        cleaning takes out (``HIDDEN_URI``); one that is, is dropped."""
        if isinstance(item, features.Resource):
            uri = item.uri
        elif isinstance(item, features.ResourceTemplate):
            uri = item.uriTemplate
        elif item.name:
            return True
        else:
            self.drop("(unnamed)", NO_NAME)
            return False
        if not uri:
            self.drop("(no URI)", NO_URI)
            return False
        if len(uri) > MAX_URI:
            self.drop(short_name(visible(uri[: _NAME_SHOWN * 4])), f"{LONG_URI} ({len(uri):,})")
            return False
        if self._uri_chars + len(uri) > LISTED_URI_CHARS:
            self.drop(short_name(visible(uri[: _NAME_SHOWN * 4])), URIS_FULL)
            return False
        if clean_text(uri)[0] != uri:
            self.drop(short_name(visible(uri)), HIDDEN_URI)
            return False
        self._uri_chars += len(uri)
        return True

    def mended(self, name: str, change: str) -> None:
        """An item kept with something taken off it (its kind is said: one list of
        these is shown for all of a server's lists)."""
        self.trimmed.cut.append(_short(f"{self.one} {name}: {change}"))

    def described(self, item: ListedItem) -> None:
        """Cut the item's description (and a prompt's arguments') to the limit."""
        item.description = self._cut(item_label(item), item.description)
        if isinstance(item, features.Prompt) and isinstance(item.arguments, list):
            for arg in item.arguments:
                arg.description = self._cut(
                    f"{item_label(item)} argument {short_name(arg.name)}", arg.description
                )

    def _cut(self, name: str, text: str | UnsetType | None) -> str | UnsetType | None:
        if not isinstance(text, str):
            return text
        limit = self.limits.description_bytes
        out = cut_text(text, limit.value)
        if out is None:
            return text
        self.mended(name, f"description cut at {limit.value:,} of {out[1]:,} bytes ({limit.key})")
        return out[0]

    def stopped(self) -> None:
        """The list is full and the server offered another page, not fetched."""
        self.trimmed.unread = True

    def signature(self) -> bytes:
        """What this fetch dropped before decoding, for telling two fetches apart."""
        t = self.trimmed
        return msgspec.json.encode([t.dropped, t.past, t.unread])

    def done(self) -> Trimmed:
        """What the fetch left out, said once if anything."""
        t = self.trimmed
        if t.short:
            t.dropped.insert(0, self._short_reason())
        reasons = t.dropped + t.cut
        if reasons:
            more = len(reasons) - _IN_LOG
            logger.warning(
                "%s: %s: %s%s",
                self.alias,
                self.source,
                "; ".join(reasons[:_IN_LOG]),
                f"; and {more} more (mcpd status lists them all)" if more > 0 else "",
                extra=log_extra(self.alias, "list_trimmed", reasons[0]),
            )
        return t

    def _short_reason(self) -> str:
        t = self.trimmed
        stop = self._stop or self.limits.items
        unread = "; later pages were not fetched" if t.unread else ""
        if stop is self.limits.list_bytes:
            return (
                f"{t.past:,} {self.what} dropped: the list reached its limit of "
                f"{stop.value:,} bytes ({stop.key}){unread}"
            )
        if t.past:
            return (
                f"{t.past:,} {self.what} past the first {stop.value:,} dropped ({stop.key}){unread}"
            )
        return (
            f"{self.what} past the first {stop.value:,} were not fetched ({stop.key}): "
            "the server offered more pages"
        )


def limited_instructions(alias: str, text: str | None, limit: Limit) -> tuple[str | None, str]:
    """The server's instructions cut to ``limit``, and what was cut ("" if nothing)."""
    out = cut_text(text, limit.value) if text is not None else None
    if out is None:
        return text, ""
    note = f"instructions cut at {limit.value:,} of {out[1]:,} bytes ({limit.key})"
    logger.warning("%s: %s", alias, note, extra=log_extra(alias, "list_trimmed", note))
    return out[0], note


def limited_saved(alias: str, kind: str, items: list[T], limits: ListLimits) -> list[T]:
    """Saved items (from the state file) held to the server's limits as they are now,
    which may be lower than when the items were saved."""
    trim = ListTrim(alias, kind, f"saved {NOUNS[kind][0]}", limits)
    kept = [item for item in items if trim.admit_decoded(item) and trim.addressable(item)]
    for item in kept:
        trim.described(item)
    trim.done()
    return kept
