"""``WWW-Authenticate`` challenges (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1).

A 401 or 403 from an MCP server says where its protected-resource metadata is
(``resource_metadata``), which scopes the request needs (``scope``) and why it
was refused (``error``: ``invalid_token``, ``insufficient_scope``). One header may
hold several challenges and a response may carry several headers; parameter values
are tokens or quoted strings with backslash escapes.

The grammar is ambiguous only in one place: after a scheme, ``abc=`` may start an
auth-param or be a token68. A token68 is the whole rest of the challenge (up to a
comma or the end), an auth-param is followed by its value, which decides it.
A malformed piece is skipped up to the next comma: a garbled header should cost
us its guidance, not the whole discovery (the well-known URLs still work).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import msgspec

from ..shown.visible import cut

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_OWS: Final = " \t"
# What RFC 6750 §3 allows in error and error_description; anything else is shown as ?.
_NOT_SAYABLE: Final = re.compile(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]")
_SAID_LIMIT: Final = 120


class Challenge(msgspec.Struct, frozen=True):
    scheme: str  # lower-cased
    params: dict[str, str] = {}  # names lower-cased; the first of duplicates wins
    token68: str | None = None


class BearerChallenge(msgspec.Struct, frozen=True):
    """What an MCP client needs from a challenge; all parts optional."""

    resource_metadata: str | None = None
    scope: tuple[str, ...] | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def insufficient_scope(self) -> bool:
        return self.error == "insufficient_scope"

    def words(self) -> str:
        """The challenge's error and description, fit to quote in a message (and to
        a model): only the characters RFC 6750 allows there, and not too many."""
        parts = [
            f'{name}="{_sayable(value)}"'
            for name, value in (
                ("error", self.error),
                ("error_description", self.error_description),
            )
            if value
        ]
        return "Bearer " + ", ".join(parts) if parts else "Bearer"


def _sayable(text: str) -> str:
    return cut(_NOT_SAYABLE.sub("?", text), _SAID_LIMIT)


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def at_end(self) -> bool:
        return self.i >= len(self.s)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ows(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in _OWS:
            self.i += 1

    def skip_separators(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t,":
            self.i += 1

    def match(self, pattern: re.Pattern[str]) -> str | None:
        m = pattern.match(self.s, self.i)
        if m is None:
            return None
        self.i = m.end()
        return m.group()

    def quoted(self) -> str:
        assert self.peek() == '"'
        self.i += 1
        out: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                self.i += 1
                if self.i >= len(self.s):
                    break
                c = self.s[self.i]
            elif (ord(c) < 0x20 and c != "\t") or c == "\x7f":
                raise ValueError("control character in a quoted string")
            out.append(c)
            self.i += 1
        raise ValueError("unterminated quoted string")

    def skip_item(self) -> None:
        """Recover from a malformed piece: move past the next comma outside quotes."""
        quoted = False
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if quoted and c == "\\":
                self.i += 1
            elif c == '"':
                quoted = not quoted
            elif c == "," and not quoted:
                return


def _param_value(p: _Parser) -> str:
    if p.peek() == '"':
        return p.quoted()
    value = p.match(_TOKEN)
    if value is None:
        raise ValueError("an auth-param without a value")
    return value


def _parse_header(text: str, out: list[Challenge]) -> None:
    p = _Parser(text)
    scheme: str | None = None
    params: dict[str, str] = {}
    token68: str | None = None

    def flush() -> None:
        if scheme is not None:
            out.append(Challenge(scheme.lower(), dict(params), token68))

    while True:
        p.skip_separators()
        if p.at_end():
            break
        start = p.i
        try:
            name = p.match(_TOKEN)
            if name is None:
                raise ValueError("expected a scheme or a parameter name")
            after_name = p.i
            p.skip_ows()
            if scheme is not None and token68 is None and p.peek() == "=":
                p.i += 1
                p.skip_ows()
                value = _param_value(p)
                params.setdefault(name.lower(), value)
            else:
                # A new challenge: the scheme, then a token68 or auth-params.
                flush()
                scheme, params, token68 = name, {}, None
                p.i = after_name
                if p.peek() == " ":
                    p.skip_ows()
                    mark = p.i
                    candidate = p.match(_TOKEN68)
                    p.skip_ows()
                    if candidate is not None and (p.at_end() or p.peek() == ","):
                        token68 = candidate
                    else:
                        p.i = mark
                        continue  # the loop reads the first auth-param
            p.skip_ows()
            if not p.at_end() and p.peek() != ",":
                raise ValueError("expected a comma")
        except ValueError:
            p.i = start
            p.skip_item()
    flush()


def parse_www_authenticate(values: Iterable[str]) -> list[Challenge]:
    """Every challenge in the given header values, in order."""
    out: list[Challenge] = []
    for value in values:
        _parse_header(value, out)
    return out


def split_scope(value: str | None) -> tuple[str, ...] | None:
    """A space-separated scope string as unique scope tokens in order; ``None``
    when nothing usable is given (an empty string is no guidance)."""
    if value is None:
        return None
    seen: dict[str, None] = {}
    for part in value.replace("\t", " ").split(" "):
        if part:
            seen.setdefault(part, None)
    return tuple(seen) or None


def bearer_challenge(values: Iterable[str]) -> BearerChallenge | None:
    """The Bearer challenge of a 401/403 (or, failing that, any challenge that
    names protected-resource metadata), or ``None`` when there is none."""
    challenges = parse_www_authenticate(values)
    chosen = next((c for c in challenges if c.scheme == "bearer"), None)
    if chosen is None:
        chosen = next((c for c in challenges if "resource_metadata" in c.params), None)
    if chosen is None:
        return None
    params = chosen.params
    return BearerChallenge(
        resource_metadata=params.get("resource_metadata") or None,
        scope=split_scope(params.get("scope")),
        error=params.get("error") or None,
        error_description=params.get("error_description"),
    )
