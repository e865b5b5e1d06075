"""Keeping the secrets mcpd holds out of what servers send on.

A server may echo a secret mcpd gave it (a header, an environment variable, its OAuth
token) or one it got hold of some other way, in a result, an error, a log message, a
list's text or what it asks an agent. ``SecretGuard`` looks for every secret mcpd
holds in the bytes a server sent, as they came: one compiled alternation of each
secret's forms as JSON encoders write them (escaped ``/``, ``"``, ``\\``, controls,
non-ASCII as ``\\uXXXX`` or as it is), searched at C speed. Only a message that holds
one is decoded, masked (each occurrence replaced by the marker naming whose secret it
was) and encoded again; anything else passes as the same object, so a spliced reply
stays spliced. Copies transformed otherwise (base64, split, hashed) are not found.

``redact_patterns`` adds well-known credential formats (``patterns``), found the same
way: a cheap trigger on the bytes, the full patterns only on the decoded text.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol.logfields import log_extra

from ..config.secrets import HeldSecret
from .masking import KnownSecrets, SecretSet, marker
from .patterns import FORMAT, TRIGGER, kind_marker, redact

logger = logging.getLogger("mcpd.secrets")

_HEX_ESCAPE: Final = re.compile(r"\\u([0-9a-f]{4})")
_decode: Final = msgspec.json.Decoder()
_encode: Final = msgspec.json.Encoder()


def json_forms(value: str) -> set[bytes]:
    """The byte forms ``value`` takes inside a JSON string as the encoders mcpd meets
    write it (msgspec's, Python's with and without ``ensure_ascii``, with ``/``
    escaped or not), and as it is."""
    forms = {value.encode()}
    for text in (
        msgspec.json.encode(value).decode(),
        json.dumps(value),
        json.dumps(value, ensure_ascii=False),
    ):
        inner = text[1:-1]
        # Some encoders write \uXXXX in upper case hex, some escape "/".
        upper = _HEX_ESCAPE.sub(lambda m: "\\u" + m[1].upper(), inner)
        for form in (inner, upper):
            forms.add(form.encode())
            forms.add(form.replace("/", "\\/").encode())
    return forms


class _Search:
    """One set of secrets, compiled: the secrets themselves and the alternation."""

    __slots__ = ("pattern", "secrets")

    def __init__(self, secrets: SecretSet, held: Iterable[HeldSecret]) -> None:
        self.secrets = secrets
        forms = {form for s in held if s.value for form in json_forms(s.value)}
        # Longest first: the alternation tries its branches in order.
        ordered = sorted(forms, key=len, reverse=True)
        self.pattern: re.Pattern[bytes] | None = (
            re.compile(b"|".join(re.escape(f) for f in ordered)) if ordered else None
        )


class SecretGuard:
    """The secrets mcpd holds now, searched for in what servers send, and how many
    were masked for each server (by whose secret it was)."""

    def __init__(self, known: KnownSecrets) -> None:
        self._known = known
        self._search = _Search(SecretSet(()), ())
        self._built: SecretSet | None = None
        # The servers whose text is also searched for credential formats.
        self.patterns_for: frozenset[str] = frozenset()
        self.counts: dict[str, Counter[str]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Take up the secrets held now; rebuilt only when they changed (a reload, an
        OAuth token refreshed, the endpoint's token replaced)."""
        current = self._known.current()
        if current is not self._built:
            self._built = current
            self._search = _Search(current, self._known.held())

    def configure(self, patterns_for: Iterable[str]) -> None:
        self.patterns_for = frozenset(patterns_for)
        self.refresh()

    # -- what servers send --

    def raw(self, alias: str, raw: Raw, what: str) -> Raw:
        """``raw`` (a JSON value as a server sent it), or a copy with every secret in
        it masked. Without one it is returned as it is: the same object."""
        pattern = self._search.pattern
        found = pattern is not None and pattern.search(raw) is not None
        if not found and not (alias in self.patterns_for and TRIGGER.search(raw) is not None):
            return raw
        try:
            value = _decode.decode(raw)
        except msgspec.DecodeError:
            return Raw(self.text(alias, bytes(raw).decode("utf-8", "replace"), what).encode())
        masked = self.value(alias, value, what)
        return raw if masked is value else Raw(_encode.encode(masked))

    def value(self, alias: str, value: Any, what: str) -> Any:
        """A decoded JSON value with every secret in its strings (keys too) masked:
        ``value`` itself when it holds none."""
        seen: list[str] = []
        masked = self._search.secrets.mask_value(value, seen)
        if alias in self.patterns_for:
            masked = _redact_value(masked, seen)
        if not seen:
            return value
        self._count(alias, seen, what)
        return masked

    def text(self, alias: str, text: str, what: str) -> str:
        """``text`` from a server (an error message, a line of its stderr) masked."""
        if not self.holds(text) and alias not in self.patterns_for:
            return text
        seen: list[str] = []
        masked = self._search.secrets.mask(text, seen)
        if alias in self.patterns_for:
            masked = redact(masked, seen)
        if not seen:
            return text
        self._count(alias, seen, what)
        return masked

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds any secret mcpd holds (as it is)."""
        pattern = self._search.pattern
        return pattern is not None and pattern.search(text.encode("utf-8", "replace")) is not None

    def mask_quietly(self, text: str) -> str:
        """``text`` masked without counting: for what mcpd writes itself."""
        return self._search.secrets.mask(text) if self.holds(text) else text

    def rpc_error(self, alias: str, exc: rpc.RPCError, what: str) -> rpc.RPCError:
        """A server's JSON-RPC error as it sent it, or a copy with its message and data
        masked."""
        message = self.text(alias, exc.message, what)
        data = self.value(alias, exc.data, what)
        if message is exc.message and data is exc.data:
            return exc
        return rpc.RPCError(exc.code, message, data)

    def _count(self, alias: str, seen: list[str], what: str) -> None:
        counts = self.counts.setdefault(alias, Counter())
        for where in seen:
            counts[where] += 1
        for where in sorted(set(seen)):
            shown = kind_marker(where[len(FORMAT) :]) if where.startswith(FORMAT) else marker(where)
            logger.warning(
                "%s: masked %s in %s",
                alias,
                shown,
                what,
                extra=log_extra(alias, "secret_masked", item=where),
            )

    def masked(self, alias: str) -> dict[str, int]:
        """How many secrets were masked in what ``alias`` sent, by whose they were."""
        return dict(self.counts.get(alias, {}))

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop the counts of servers no longer configured."""
        for alias in [a for a in self.counts if not keep(a)]:
            del self.counts[alias]


def _redact_value(value: Any, seen: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, seen)
    if isinstance(value, dict):
        return {redact(str(k), seen): _redact_value(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, seen) for v in value]
    return value


class LogMask(logging.Filter):
    """Masks the secrets mcpd holds in every log record (its message and fields), as
    a last line: a server's stderr, or its text quoted in an event."""

    def __init__(self, guard: SecretGuard) -> None:
        super().__init__()
        self._guard = guard

    def filter(self, record: logging.LogRecord) -> bool:
        guard = self._guard
        message = record.getMessage()
        alias = record.__dict__.get("mcpd_server")
        server = alias if isinstance(alias, str) else ""
        if guard.holds(message):
            record.msg, record.args = _masked(guard, server, message), None
        for key, value in list(vars(record).items()):
            if key.startswith("mcpd_") and isinstance(value, str) and guard.holds(value):
                setattr(record, key, _masked(guard, server, value))
        return True


def _masked(guard: SecretGuard, server: str, text: str) -> str:
    if server:
        return guard.text(server, text, "a log line")
    return guard.mask_quietly(text)
