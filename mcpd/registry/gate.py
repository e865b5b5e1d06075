"""The gate between what a server lists and what agents are shown.

Every list a server sends (tools, prompts, resource templates; resources and
instructions are cleaned too) passes here before the tables take it. Each item is
cleaned (``readable``), checked by the finding rules, and compared with its pin
(``pins``): an item that matches its pin, or that is seen for the first time on a
server not yet approved, is shown as it is now; one that differs from its pin, or
is new on an approved server, is held, warned of or accepted as the server's
settings say (``Config.pin_policy``). A held item stays listed but unavailable,
shown as it was approved (or by its name alone when nothing of it was), with a
reason a model can read; the change waits in ``pending`` for ``mcpd approve``.

Each change and each finding is said once per definition in the journal (``news``),
and counted for ``mcpd status``; what is kept of each list is in ``judged``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final, Generic, TypeVar

import msgspec

from protocol import mcp, surface

from ..config.model import DEFAULT_POLICY, PinPolicy
from .clean import clean_text
from .judged import READERS, ListState, Pending, Seen, Why, held_reason
from .news import News
from .pins import KINDS, Item, Kind, Pin, PinSet, ServerPins, digest, item_of, key_of
from .readable import Readable
from .rules import Finding

T = TypeVar("T", mcp.Tool, surface.Prompt, surface.ResourceTemplate)
# Pins of items a server no longer lists are kept (one that comes back changed is a
# change), but no more than this many for one list: a server that lists new names
# every time must not grow the pin file without end.
_UNLISTED_PINS: Final = 1000


class Verdicts(msgspec.Struct, Generic[T]):
    shown: dict[str, T]  # by the server's name (a template's URI template)
    held: dict[str, str]  # the held ones: why, in words a model can act on

    def same_as(self, other: Verdicts[T]) -> bool:
        """Whether agents would be shown the very same items (judging the same list
        again gives the same objects for what did not change)."""
        return (
            self.held == other.held
            and self.shown.keys() == other.shown.keys()
            and all(item is other.shown[name] for name, item in self.shown.items())
        )


class Approval(msgspec.Struct):
    approved: list[str]  # "kind name"
    stale: list[str]  # changed again since it was shown: still held
    unknown: list[str]  # not waiting for approval


class Gate:
    def __init__(
        self,
        policy: Callable[[str], PinPolicy] = lambda alias: DEFAULT_POLICY,
        pins: PinSet | None = None,
    ) -> None:
        self.policy = policy
        self.pins = pins if pins is not None else PinSet()
        self.on_pinned: Callable[[], None] = lambda: None  # pins changed: save them
        self.changes: dict[str, int] = {}  # definition changes seen since start, by alias
        # The pins could not be read: no server is approved by being listed, every one
        # not approved before is held whole (as hold_new_servers does) until approved.
        self.hold_unapproved = False
        # By (alias, kind): kind is also "resource" or "instructions" here.
        self._lists: dict[tuple[str, str], ListState] = {}

    def _list(self, alias: str, kind: str) -> ListState:
        found = self._lists.get((alias, kind))
        if found is None:
            found = self._lists[(alias, kind)] = ListState()
        return found

    # -- lists --

    def tools(self, alias: str, items: Mapping[str, mcp.Tool]) -> Verdicts[mcp.Tool]:
        return self._judge(alias, "tool", items)

    def prompts(self, alias: str, items: Mapping[str, surface.Prompt]) -> Verdicts[surface.Prompt]:
        return self._judge(alias, "prompt", items)

    def templates(
        self, alias: str, items: Iterable[surface.ResourceTemplate]
    ) -> Verdicts[surface.ResourceTemplate]:
        return self._judge(alias, "template", {key_of(t): t for t in items})

    def resources(self, alias: str, items: Iterable[surface.Resource]) -> list[surface.Resource]:
        """Resources cleaned (not pinned: a folder's files come and go)."""
        state = self._list(alias, "resource")
        news = News(alias, "resource")
        out: list[surface.Resource] = []
        for item in items:
            seen = state.seen(item.uri, item, "resource")
            self._found(state, news, item.uri, seen)
            assert isinstance(seen.item, surface.Resource)
            out.append(seen.item)
        state.keep_only({item.uri for item in out})
        news.flush()
        return out

    def instructions(self, alias: str, text: str | None) -> str | None:
        """A server's instructions, cleaned; what the cleaning and the rules found is
        recorded (instructions are not pinned: they are shown fenced, as the server's)."""
        state = self._list(alias, "instructions")
        if text is None:
            state.keep_only(set())
            return None
        out, removed = clean_text(text)
        read = Readable(out, {"instructions": removed} if removed else {}, [("instructions", out)])
        seen = Seen(out, None, tuple(read.findings()))
        news = News(alias, "instructions")
        self._found(state, news, "", seen, digest(text.encode()))
        news.flush()
        return out

    def _judge(self, alias: str, kind: Kind, items: Mapping[str, T]) -> Verdicts[T]:
        policy = self.policy(alias)
        server = self.pins.servers.get(alias)
        if server is None:
            server = self.pins.servers[alias] = ServerPins()
        pinned = server.of(kind)
        state = self._list(alias, kind)
        news = News(alias, kind)
        shown: dict[str, T] = {}
        held: dict[str, str] = {}
        saved = False
        for name, item in items.items():
            seen = state.seen(name, item, kind)
            offered = seen.offered
            assert offered is not None
            pin = pinned.get(name)
            why: Why | None = None
            if pin is None:
                if not server.approved and (policy.hold_new_servers or self.hold_unapproved):
                    why = "new_server"
                elif server.approved and policy.on_new_item == "hold":
                    why = "new"
                else:
                    pinned[name] = offered
                    saved = True
                    if server.approved:  # else: first sight, nothing to tell
                        self._changed(state, news, name, offered.digest, "added",
                                      policy.on_new_item)  # fmt: skip
            elif pin.digest == offered.digest:
                seen.offered = pin  # one copy of the definition, not two
            else:
                if policy.on_changed_item == "hold":
                    why = "changed"
                else:
                    pinned[name] = offered
                    saved = True
                    self._changed(state, news, name, offered.digest, "changed",
                                  policy.on_changed_item)  # fmt: skip
            self._found(state, news, name, seen, offered.digest)
            now = pinned.get(name)
            reviewed = now is not None and now.reviewed
            if why is None and seen.findings and policy.on_finding == "hold" and not reviewed:
                why = "finding"
            if why is None:
                state.pending.pop(name, None)
                shown[name] = seen.item  # type: ignore[assignment]
                continue
            # What the rules find in what is offered, for the person who approves it.
            rules = sorted({f.rule for f in seen.findings})
            held[name] = held_reason(why, alias, rules)
            approved = pin if why == "changed" else None
            key = approved.digest if approved is not None else ""
            view = state.views.get(name)
            if view is None or view[0] != key:
                view = state.views[name] = (key, self._held_view(kind, name, approved))
            shown[name] = view[1]  # type: ignore[assignment]
            state.pending[name] = Pending(alias, kind, name, why, offered, approved, rules)
            if why in ("changed", "new"):
                self._changed(state, news, name, offered.digest, why, "hold")
        state.keep_only(set(items))
        news.flush()
        if saved:
            _forget_unlisted(pinned, items)
            self.on_pinned()
        return Verdicts(shown, held)

    def _held_view(self, kind: Kind, name: str, approved: Pin | None) -> Item:
        """What agents are shown of a held item: as approved, else its name alone."""
        if approved is not None:
            try:
                shown: Item = READERS[kind](item_of(kind, approved)).item
                return shown
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
        if kind == "tool":
            return mcp.Tool(name=name)
        if kind == "prompt":
            return surface.Prompt(name=name)
        return surface.ResourceTemplate(uriTemplate=name, name=name)

    # -- the journal --

    def _changed(
        self, state: ListState, news: News, name: str, digest: str, how: str, handling: str
    ) -> None:
        if state.tell(name, how, digest):
            self.changes[news.alias] = self.changes.get(news.alias, 0) + 1
            news.change(name, how, handling)

    def _found(self, state: ListState, news: News, name: str, seen: Seen, digest: str = "") -> None:
        if not seen.findings:
            state.findings.pop(name, None)
            return
        state.findings[name] = seen.findings
        if state.tell(name, "finding", digest or str(id(seen))):
            news.finding(name, seen.findings)

    # -- approval --

    def settle(self, alias: str) -> None:
        """The server listed everything once: unless new servers are held, that is
        its approval, and items it lists from now on are new items."""
        server = self.pins.servers.get(alias)
        if server is None or server.approved or self.hold_unapproved:
            return
        if self.policy(alias).hold_new_servers:
            return
        server.approved = True
        self.on_pinned()

    def approve(
        self, alias: str, picks: list[tuple[Kind, str, str]] | None, whole: bool = False
    ) -> Approval:
        """Pin what the server offers now for each ``(kind, name, digest)`` picked (all
        that waits, when None), if it is still what was shown (the digest). With
        ``whole`` (or no picks), and nothing of the server left waiting, the server is
        approved as a whole."""
        server = self.pins.servers.setdefault(alias, ServerPins())
        out = Approval([], [], [])
        wanted = None if picks is None else {(k, n): d for k, n, d in picks}
        for pending in self.pending(alias):
            key = (pending.kind, pending.name)
            if wanted is not None and key not in wanted:
                continue
            label = f"{pending.kind} {pending.name}"
            if wanted is not None and wanted.pop(key) != pending.offered.digest:
                out.stale.append(label)
                continue
            offered = pending.offered
            server.of(pending.kind)[pending.name] = Pin(offered.digest, offered.definition, True)
            del self._list(alias, pending.kind).pending[pending.name]
            out.approved.append(label)
        out.unknown = [f"{k} {n}" for k, n in (wanted or {})]
        if (whole or picks is None) and not self.pending(alias):
            server.approved = True
        self.on_pinned()
        return out

    def import_pins(self, pins: PinSet, replace: bool) -> int:
        """Take a checked pin set (an export) as approved; ``replace``: each server in
        it keeps no pin of its own besides. Returns how many items it pins."""
        count = 0
        for alias, incoming in pins.servers.items():
            server = self.pins.servers.get(alias)
            if server is None or replace:
                server = self.pins.servers[alias] = ServerPins()
            server.approved = server.approved or incoming.approved
            for kind in KINDS:
                server.of(kind).update(incoming.of(kind))
                count += len(incoming.of(kind))
        self.on_pinned()
        return count

    def export(self, aliases: Iterable[str] | None = None) -> PinSet:
        wanted = set(aliases) if aliases is not None else None
        return PinSet(
            servers={
                a: s for a, s in sorted(self.pins.servers.items()) if wanted is None or a in wanted
            }
        )

    def forget(self, alias: str) -> None:
        """The server left the configuration: nothing of it waits or is found (its
        pins stay, for when it comes back)."""
        for key in [k for k in self._lists if k[0] == alias]:
            del self._lists[key]

    # -- what waits, what was found, how many --

    def pending(self, alias: str | None = None) -> list[Pending]:
        return [
            p
            for (a, _), state in sorted(self._lists.items())
            if alias is None or a == alias
            for p in state.pending.values()
        ]

    def found(self, alias: str | None = None) -> list[tuple[str, str, str, tuple[Finding, ...]]]:
        """(alias, kind, name, findings) of every item something was found in."""
        return [
            (a, kind, name, findings)
            for (a, kind), state in sorted(self._lists.items())
            if alias is None or a == alias
            for name, findings in sorted(state.findings.items())
        ]

    def counts(self, alias: str) -> dict[str, int]:
        lists = [s for (a, _), s in self._lists.items() if a == alias]
        return {
            "held": sum(len(s.pending) for s in lists),
            "definition_changes": self.changes.get(alias, 0),
            "findings": sum(len(s.findings) for s in lists),
        }


def _forget_unlisted(pinned: dict[str, Pin], listed: Mapping[str, object]) -> None:
    """The oldest pins of items not listed now, past the number kept of them."""
    extra = len(pinned) - len(listed) - _UNLISTED_PINS
    if extra <= 0:
        return
    for name in [n for n in pinned if n not in listed][:extra]:
        del pinned[name]
