"""Masking the secrets mcpd holds in what it writes down or shows a person.

``SecretSet`` finds every one of many secrets in a text in one pass over it (an
Aho-Corasick automaton: the work is the text's length plus what is found, whatever
the number of secrets). ``KnownSecrets`` is the set the daemon holds now: the
config's (``config.credentials.held``), replaced on reload, and sources asked each time for what
changes on their own (OAuth tokens, the endpoint token).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from ...config.credentials.secrets import HeldSecret
from ...config.loading.expand import MIN_SECRET


def marker(where: str) -> str:
    """What a secret is replaced by: whose it was, never any of it."""
    return f"[secret of {where}]"


def masked_value(value: object, mask: Callable[[str], str]) -> object:
    """A decoded JSON value with every string (keys too) put through ``mask``, and any
    number whose digits ``mask`` changes replaced by what it makes of them."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(str(k)): masked_value(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [masked_value(v, mask) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
        masked = mask(text)
        return value if masked == text else masked
    return value


class _Node:
    __slots__ = ("fail", "hit", "next", "out")

    def __init__(self) -> None:
        self.next: dict[str, _Node] = {}
        self.fail: _Node | None = None
        # The longest secret that ends here (length, owner), and the nearest node down
        # the failure chain that ends one (``out``).
        self.hit: tuple[int, str] | None = None
        self.out: _Node | None = None


class SecretSet:
    """A fixed set of secrets, searched for together."""

    def __init__(self, secrets: Iterable[HeldSecret]) -> None:
        self._root = _Node()
        self.size = 0
        for secret in secrets:
            if secret.value:
                self._add(secret.value, secret.where)
        self._link()

    def _add(self, value: str, where: str) -> None:
        node = self._root
        for c in value:
            node = node.next.setdefault(c, _Node())
        if node.hit is None:
            self.size += 1
            node.hit = (len(value), where)

    def _link(self) -> None:
        root = self._root
        queue: deque[_Node] = deque()
        for child in root.next.values():
            child.fail = root
            queue.append(child)
        while queue:
            node = queue.popleft()
            for c, child in node.next.items():
                fail = node.fail
                while fail is not None and c not in fail.next:
                    fail = fail.fail
                child.fail = fail.next[c] if fail is not None else root
                target = child.fail
                child.out = target if target.hit is not None else target.out
                queue.append(child)

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """Every occurrence, as (start, end, owner), in the order their ends come."""
        if not self.size:
            return []
        found = []
        root = node = self._root
        for i, c in enumerate(text):
            while node is not root and c not in node.next:
                assert node.fail is not None
                node = node.fail
            node = node.next.get(c, root)
            hit_node: _Node | None = node if node.hit is not None else node.out
            while hit_node is not None:
                assert hit_node.hit is not None
                length, where = hit_node.hit
                found.append((i + 1 - length, i + 1, where))
                hit_node = hit_node.out
        return found

    def mask(self, text: str, seen: list[str] | None = None) -> str:
        """``text`` with every secret in it replaced by its marker; overlapping ones are
        masked together (under the first one's owner). ``seen`` gets the owner of each
        marker put in."""
        found = self.find(text)
        if not found:
            return text
        found.sort()
        out: list[str] = []
        pos = 0
        span_start, span_end, owner = found[0]
        for start, end, where in found[1:]:
            if start < span_end:
                span_end = max(span_end, end)
                continue
            out += [text[pos:span_start], marker(owner)]
            if seen is not None:
                seen.append(owner)
            pos = span_end
            span_start, span_end, owner = start, end, where
        out += [text[pos:span_start], marker(owner), text[span_end:]]
        if seen is not None:
            seen.append(owner)
        return "".join(out)

    def mask_value(self, value: object, seen: list[str] | None = None) -> object:
        """``value`` as ``masked_value`` masks it with this set."""
        if not self.size:
            return value
        return masked_value(value, lambda text: self.mask(text, seen))


SecretSource = Callable[[], Iterable[HeldSecret]]
_EMPTY: Final = SecretSet(())


class KnownSecrets:
    """The secrets the daemon holds now, by where they come from."""

    def __init__(self) -> None:
        self._fixed: dict[str, tuple[HeldSecret, ...]] = {}
        self._sources: dict[str, SecretSource] = {}
        self._built_for: tuple[tuple[str, str], ...] | None = None
        self._set = _EMPTY

    def replace(self, name: str, secrets: Iterable[HeldSecret]) -> None:
        """The secrets of ``name`` (``"config"``) are now these."""
        self._fixed[name] = tuple(secrets)

    def watch(self, name: str, source: SecretSource) -> None:
        """``source()`` says what ``name`` holds each time the set is used."""
        self._sources[name] = source

    def held(self) -> list[HeldSecret]:
        """Every secret held now, from every place; none too short to be told apart
        from text (a server's authorization server chooses its tokens: one of a letter
        would mask that letter in everything mcpd writes and every server's replies)."""
        held = [s for group in self._fixed.values() for s in group]
        for source in self._sources.values():
            held += source()
        return [s for s in held if len(s.value) >= MIN_SECRET]

    def current(self) -> SecretSet:
        """The set held now: the same object while nothing changed."""
        held = self.held()
        key = tuple((s.value, s.where) for s in held)
        if key != self._built_for:
            self._set, self._built_for = SecretSet(held), key
        return self._set

    def mask(self, text: str) -> str:
        return self.current().mask(text)

    def mask_value(self, value: object) -> object:
        return self.current().mask_value(value)
