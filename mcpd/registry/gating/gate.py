"""The gate between what a server lists and what agents are shown.

Every list a server sends (tools, prompts, resource templates; resources are
cleaned too, and held only with a server held whole), and its instructions as an
item of their own, pass here before agents are shown them. Each item is cleaned
(``readable``), checked by the finding rules, and compared with its pin (``definitions``):
an item that matches its pin, or that is seen for the first time on a server not
yet approved, is shown as it is now; one that differs from its pin, or is new on an
approved server, is held, warned of or accepted as the server's settings say
(``Config.pin_policy``). A held item stays listed but unavailable, shown as it was
approved (or by its name alone when nothing of it was), with a reason a model can
read; the change waits for ``mcpd approve``.

Each change and each finding is said once per definition in the journal (``news``),
and counted for ``mcpd status``. What is kept of each list (``judged``), the pins,
and what a person asks of what waits are the operator's side (``review``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Final, Literal, NamedTuple

from protocol.mcp import core as mcp
from protocol.mcp import features

from ...config.tables.model import DEFAULT_POLICY, PinPolicy
from ...policy.redaction.guard import SecretGuard
from ..naming.facing import Namesakes, looked_up, marks
from ..pinning.definitions import INSTRUCTIONS, Instructions, Kind, PinRecord, key_of, record_of
from ..pinning.digests import ServerPins, former_match, shown_digest
from ..pinning.review import Review
from .judged import (
    HeldOffer,
    HeldView,
    ItemJudged,
    ListState,
    Masker,
    T,
    Verdicts,
    WhyHeld,
    held_reason,
    held_view,
)
from .news import News

# Pins of items a server no longer lists are kept (one that comes back changed is a
# change), by their digest alone, but no more than this many for one list, nor more
# characters of their names: a server that lists new names every time must not grow
# the pin file without end. A pin forgotten leaves marks of what agents know its item
# by (a template's, of what it may read), and an item new to the server that finds one
# of them is judged as a change ("forgotten"), never as new.
_UNLISTED_PINS: Final = 1000
UNLISTED_NAME_CHARS: Final = 64 * 1024
_STRICTER: Final = ("accept", "warn", "hold")  # each handling after a laxer one

Renames = Mapping[str, str]


class _Judging(NamedTuple):
    """One list of one server being judged: its pins, the settings it is judged by,
    and where what is found is kept (``state``) and told (``news``)."""

    alias: str
    kind: Kind
    server: ServerPins
    policy: PinPolicy
    state: ListState
    news: News
    # The server waits whole for approval, and each item it lists new with it.
    whole: bool


def _judged_against(
    server: ServerPins,
    pinned: dict[str, bytes],
    kind: Kind,
    name: str,
    namesakes: Namesakes | None,
    sought: Callable[[str], list[str]],
) -> tuple[bytes | None, str]:
    """The pin of ``pinned`` an item is judged against (None: it has none), and the name
    it is pinned under: its own, or a pinned namesake's that agents know it by. An item
    whose pin the server may have had mcpd forget has one that nothing matches."""
    was = name
    pin = pinned.get(name)
    if pin is None and namesakes is not None:
        was = namesakes.of(name) or name
        pin = pinned.get(was)
    if pin is None and server.approved and server.forgot(kind, sought(name)):
        pin = b""
    return pin, was


class ListGate:
    """Every list and instructions a server sends, judged before agents see them."""

    def __init__(
        self,
        policy: Callable[[str], PinPolicy] = lambda alias: DEFAULT_POLICY,
        review: Review | None = None,
        masking: SecretGuard | None = None,
    ) -> None:
        self.policy = policy
        self.review = review if review is not None else Review()
        # The secrets mcpd holds, masked in what cleaning makes of each item (``Masker``).
        self.masking = masking
        # Each server's instructions as the item last judged: every agent's handshake
        # asks for them again, and the same object is known at once, not compared.
        self._instructions: dict[str, Instructions] = {}

    # -- lists --

    # ``renames``: the operator's, by the server's name (``[servers.X.tools] rename``).

    def tools(
        self, alias: str, items: Mapping[str, mcp.Tool], renames: Renames | None = None
    ) -> Verdicts[mcp.Tool]:
        return self._judge(alias, "tool", items, renames)

    def prompts(
        self, alias: str, items: Mapping[str, features.Prompt], renames: Renames | None = None
    ) -> Verdicts[features.Prompt]:
        return self._judge(alias, "prompt", items, renames)

    def templates(
        self, alias: str, items: Iterable[features.ResourceTemplate]
    ) -> Verdicts[features.ResourceTemplate]:
        return self._judge(alias, "template", {key_of(t): t for t in items})

    def read_ahead(self, alias: str, kind: Kind, name: str, item: T) -> None:
        """Clean and check one item of a list about to be judged, so that judging the
        list finds it done. What is made of an item depends on the item alone, so
        agents are shown nothing of it before the list is judged whole, and an item
        read ahead of a list that is never judged is read again when it is listed."""
        self.review.list_state(alias, kind).seen(name, item, kind, self._mask(alias))

    def resources(
        self, alias: str, items: Iterable[features.Resource]
    ) -> Verdicts[features.Resource]:
        """Resources cleaned, by URI. They are not pinned (a folder's files come and
        go), so no change of one is held; but a server held whole has its resources
        held with it, each shown by its URI alone, until the server is approved."""
        state = self.review.list_state(alias, "resource")
        news = News(alias, "resource")
        whole = self.held_whole(alias)
        mask = self._mask(alias)
        shown: dict[str, features.Resource] = {}
        held: dict[str, str] = {}
        for item in items:
            uri = item.uri
            seen = state.seen(uri, item, "resource", mask)
            self._found(state, news, uri, seen)
            if whole is None:
                state.pending.pop(uri, None)
                state.views.pop(uri, None)
                assert isinstance(seen.item, features.Resource)
                shown[uri] = seen.item
            else:
                shown[uri], held[uri] = state.hold_resource(alias, item), whole
        state.keep_only(set(shown))
        news.flush()
        return Verdicts(shown, held)

    def held_whole(self, alias: str) -> str | None:
        """Why all of a server is held, in words a model can act on (None: it is
        not): it was never approved, and new servers are held until they are."""
        server = self.review.pins.servers.get(alias)
        if server is not None and server.approved:
            return None
        if self.policy(alias).hold_new_servers or self.review.hold_unapproved:
            return held_reason("new_server", alias)
        return None

    def instructions(self, alias: str, text: str | None) -> str | None:
        """A server's instructions, cleaned, judged against their pin as an item is
        (a held change: the approved text, or none when none was). A server that
        gives none has nothing pinned or held of them."""
        if text is None:
            self._instructions.pop(alias, None)
            self.withdrawn(alias, "instructions")
            return None
        item = self._instructions.get(alias)
        if item is None or item.instructions != text:
            item = self._instructions[alias] = Instructions(text)
        shown = self._judge(alias, "instructions", {INSTRUCTIONS: item}).shown
        return shown[INSTRUCTIONS].instructions or None

    def _mask(self, alias: str) -> Masker | None:
        return None if self.masking is None else Masker(self.masking, alias)

    def withdrawn(self, alias: str, kind: Kind | Literal["resource"]) -> None:
        """The server no longer offers anything of ``kind``: nothing of it waits or is
        found any more. Its pins stay, as those of items a list no longer has do."""
        self.review.list_state(alias, kind).keep_only(set())

    def _judge(
        self, alias: str, kind: Kind, items: Mapping[str, T], renames: Renames | None = None
    ) -> Verdicts[T]:
        server = self.review.pins.servers.get(alias)
        if server is None:
            server = self.review.pins.servers[alias] = ServerPins()
        pinned = server.of(kind)
        state = self.review.list_state(alias, kind)
        news = News(alias, kind)
        whole = self.held_whole(alias) is not None
        judging = _Judging(alias, kind, server, self.policy(alias), state, news, whole)
        shown: dict[str, T] = {}
        waiting: list[tuple[str, ItemJudged, WhyHeld, str]] = []
        saved = False
        sought = partial(looked_up, kind, renames=renames or {})
        # An approved server's new name that agents know as a pinned one's is a
        # change of that item (``facing``); what is pinned in this loop is no namesake.
        namesakes = None
        if server.approved and any(name not in pinned for name in items):
            namesakes = Namesakes(kind, pinned, renames or {})
        # Instructions are orders by nature: what the rules find in them is told,
        # never a reason to hold them.
        held_for_findings = judging.policy.on_finding == "hold" and kind != "instructions"
        mask = self._mask(alias)
        for name, item in items.items():
            seen = state.seen(name, item, kind, mask)
            offered = seen.digest
            pin, was = _judged_against(server, pinned, kind, name, namesakes, sought)
            why, repinned = self._against_pin(judging, name, seen, pin, was)
            saved = saved or repinned
            self._found(state, news, name, seen, offered)
            reviewed = (kind, name) in server.reviewed
            if why is None and seen.findings and held_for_findings and not reviewed:
                why = "finding"
            if why is None:
                state.pending.pop(name, None)
                shown[name] = seen.item  # type: ignore[assignment]
            else:
                waiting.append((name, seen, why, was))
        held = self._hold(alias, kind, state, news, pinned, waiting, shown) if waiting else {}
        listed = set(items)
        state.keep_only(listed)
        news.flush()
        # What a held item is shown as, approved under another name, stays whole.
        listed.update(was for _, _, why, was in waiting if why == "changed")
        left = partial(marks, kind, renames=renames or {})
        changed = server.unlist(kind, listed, _UNLISTED_PINS, UNLISTED_NAME_CHARS, left)
        if changed:
            self.review.unwritten.drop(alias, kind, changed)
        if changed or saved:
            self.review.on_pinned()
        return Verdicts(shown, held)

    def _against_pin(
        self, j: _Judging, name: str, seen: ItemJudged, pin: bytes | None, was: str
    ) -> tuple[WhyHeld | None, bool]:
        """What an item's pin (``_judged_against``) says of it: why it waits (None: it
        is shown), and whether what is offered was pinned."""
        policy, server, kind = j.policy, j.server, j.kind
        offered = seen.digest
        assert offered is not None
        if pin is None:
            if j.whole:
                return "new_server", False
            if server.approved and policy.on_new_item == "hold":
                return "new", False
            self._pin(j.alias, kind, server, name, seen)
            if server.approved:  # else: first sight, nothing to tell
                self._changed(j.state, j.news, name, offered, "added", policy.on_new_item)
            return None, True
        if pin == offered:
            seen.digest = pin  # one copy of the digest, not two
            if (kind, name) not in server.bare:
                return None, False
            # Back as it was: its definition kept again.
            self._pin(j.alias, kind, server, name, seen, (kind, name) in server.reviewed)
            return None, True
        if server.former and former_match(server, kind, name, seen.source, pin):  # type: ignore[arg-type]
            # Pinned by an earlier mcpd that left these fields out: what it pinned
            # is unchanged, and the fields it did not see are pinned from now on.
            self._pin(j.alias, kind, server, name, seen, (kind, name) in server.reviewed)
            return None, True
        # An item under a name whose pin was forgotten is a change or a new item: which,
        # nothing tells, so the stricter of the two settings holds for it.
        on_forgotten = max(policy.on_changed_item, policy.on_new_item, key=_STRICTER.index)
        if (policy.on_changed_item if pin else on_forgotten) == "hold":
            return ("changed" if pin else "forgotten"), False
        self._pin(j.alias, kind, server, name, seen)
        if pin:
            self._changed(j.state, j.news, name, offered, "changed", policy.on_changed_item, was)
        else:
            self._changed(j.state, j.news, name, offered, "forgotten", on_forgotten)
        return None, True

    def _pin(
        self,
        alias: str,
        kind: Kind,
        server: ServerPins,
        name: str,
        seen: ItemJudged,
        reviewed: bool = False,
    ) -> None:
        """Take what is offered as the item's pin (not a person's approval, unless
        ``reviewed`` says one stands)."""
        assert seen.digest is not None
        server.of(kind)[name] = seen.digest
        server.repinned(kind, name, reviewed)
        self.review.unwritten.put(alias, kind, name, seen.source)  # type: ignore[arg-type]

    def _hold(
        self,
        alias: str,
        kind: Kind,
        state: ListState,
        news: News,
        pinned: dict[str, bytes],
        waiting: list[tuple[str, ItemJudged, WhyHeld, str]],
        shown: dict[str, T],
    ) -> dict[str, str]:
        """Hold what waits: shown as approved (the approved definitions not at hand
        read at once, for all of them), or by its name alone; under the server's name
        for it now, whatever name it was approved under (``was``). Why each is, by
        name."""
        wanted = [
            (alias, kind, was, pinned[was])
            for name, _, why, was in waiting
            if why == "changed" and state.view(name, pinned[was]) is None
        ]
        approved = self.review.definitions(wanted) if wanted else {}
        held: dict[str, str] = {}
        for name, seen, why, was in waiting:
            assert seen.digest is not None
            # What the rules find in what is offered, for the person who approves it.
            rules = sorted({f.rule for f in seen.findings})
            held[name] = held_reason(why, alias, rules)
            pin = pinned[was] if why == "changed" else b""
            view = state.view(name, pin)
            if view is None:
                data = approved.get((alias, kind, was))
                record = None if data is None else PinRecord(shown_digest(pin), data)
                shown_held = held_view(kind, name, record, self._mask(alias))
                view = state.views[name] = HeldView(pin, shown_held, record)
            shown[name] = view.item  # type: ignore[assignment]
            old = state.pending.get(name)
            now = (why, shown_digest(seen.digest), view.definition)
            if old is None or (old.why, old.offered.digest, old.approved) != now:
                offered = record_of(seen.source)  # type: ignore[arg-type]
                state.pending[name] = HeldOffer(
                    alias, kind, name, why, offered, view.definition, rules, seen.findings
                )
            if why in ("changed", "new", "forgotten"):
                self._changed(state, news, name, seen.digest, why, "hold", was)
        return held

    # -- the journal --

    def _changed(
        self,
        state: ListState,
        news: News,
        name: str,
        digest: bytes,
        how: str,
        handling: str,
        was: str | None = None,
    ) -> None:
        if state.tell(name, how, digest):
            self.review.changes[news.alias] = self.review.changes.get(news.alias, 0) + 1
            news.change(name, how, handling, was)

    def _found(
        self, state: ListState, news: News, name: str, seen: ItemJudged, digest: bytes | None = None
    ) -> None:
        if not seen.findings:
            state.findings.pop(name, None)
            return
        state.findings[name] = seen.findings
        if state.tell(name, "finding", seen if digest is None else digest):
            news.finding(name, seen.findings)

    # -- a server approved by listing --

    def settle(self, alias: str) -> None:
        """The server listed everything once: unless new servers are held, that is
        its approval, and items it lists from now on are new items."""
        server = self.review.pins.servers.get(alias)
        if server is None or server.approved or self.review.hold_unapproved:
            return
        if self.policy(alias).hold_new_servers:
            return
        server.approved = True
        self.review.unwritten.changed(alias)
        self.review.on_pinned()
