"""Keeping the secrets mcpd holds out of what servers send on.

A server may echo a secret mcpd gave it (a header, an environment variable, its OAuth
token) or one it got hold of some other way, in a result, an error, a log message, a
list's text or what it asks an agent. ``SecretGuard`` looks for every secret mcpd
holds in the bytes a server sent, as they came, in each form JSON encoders write it
(``spelling``: escaped ``/``, ``"``, ``\\``, controls, what is not ASCII, and what
HTML-safe encoders escape), searched at C speed. Only a message that holds one is
decoded, masked (each occurrence replaced by the marker naming whose secret it was)
and encoded again; anything else passes as the same object, so a spliced reply stays
spliced. What mcpd decodes of a server's, changes and writes again (``written``) is
searched again as written: a secret spelled with escapes no encoder writes, a number
the server wrote another way, or a secret split by a character mcpd takes out, is in
none of the server's bytes, but plain in mcpd's. A text (an error's message, a reason
that quotes what a server wrote) is searched for each secret as it is and as mcpd
quotes a server's words. Copies transformed otherwise (base64, split, hashed,
lower-cased) are not found.

What mcpd keeps of a server's words to show later (why it failed, why it needs a
login) is masked as it is kept; ``shown`` passes a status row once more, as
``LogMask`` passes every log record.

``redact_patterns`` adds well-known credential formats (``patterns``), found the same
way: a cheap trigger on the bytes, the full patterns only on the decoded text."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Final, TypeVar

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from .cutparts import WRITTEN_NOTE, CutParts
from .masking import KnownSecrets, marker, masked_value
from .patterns import FORMAT, TRIGGER, kind_marker, redact
from .spelling import Spellings

logger = logging.getLogger("mcpd.secrets")

_decode: Final = msgspec.json.Decoder()
_encode: Final = msgspec.json.Encoder()
# For JSON whose numbers no double holds (``1e400``): each kept as a decimal, and
# written again as the number it is.
_decode_exact: Final = msgspec.json.Decoder(float_hook=Decimal)
_encode_exact: Final = msgspec.json.Encoder(decimal_format="number")

RowT = TypeVar("RowT", bound=msgspec.Struct)


class _Search:
    """One set of secrets, compiled: their spellings for a server's bytes, those for
    mcpd's (theirs and those of mcpd's quotes of them), and an alternation of the
    values for decoded text, each searched at C speed (a result of many megabytes that
    holds a secret is masked without a Python step a byte)."""

    __slots__ = ("cuts", "key", "ours", "owners", "pattern", "values", "written")

    def __init__(self, owners: dict[str, str]) -> None:
        self.owners = owners
        self.key = tuple(owners.items())
        self.pattern = Spellings.of(self.owners)
        # In text, each as it is and as mcpd quotes a server's words in its own
        # (``visible.quote``): a reason quotes what the server wrote.
        self.written: dict[str, str] = {}
        for value, where in self.owners.items():
            self.written.setdefault(value, where)
            self.written.setdefault(quote(value, len(value))[1:-1], where)
        self.cuts = CutParts(self.written)
        # In bytes mcpd writes, in the forms of both: its own words may quote a server's.
        same = self.written.keys() == self.owners.keys()
        self.ours = self.pattern if same else Spellings.of(self.written)
        values = sorted(self.written, key=len, reverse=True)
        self.values: re.Pattern[str] | None = (
            re.compile("|".join(re.escape(v) for v in values)) if values else None
        )

    def mask(self, text: str, seen: list[str] | None) -> str:
        """``text`` with every secret replaced by its marker; secrets that overlap are
        masked as one (under the first one's owner), so no part of either shows; and
        the beginning of a secret where mcpd cut a server's words."""
        values = self.values
        found = values.search(text) if values is not None else None
        if found is None or values is None:
            return self._cut_parts(text, seen)
        out: list[str] = []
        pos = 0
        while found is not None:
            start, end = found.span()
            owner = self.written[found.group()]
            # Any secret that begins inside this one's span extends it; the first that
            # begins after it is the next one found.
            later = values.search(text, start + 1)
            while later is not None and later.start() < end:
                end = max(end, later.end())
                later = values.search(text, later.start() + 1)
            out += [text[pos:start], marker(owner)]
            if seen is not None:
                seen.append(owner)
            pos, found = end, later
        out.append(text[pos:])
        return self._cut_parts("".join(out), seen)

    def _cut_parts(self, text: str, seen: list[str] | None) -> str:
        # mcpd cuts a server's words short (``visible.CUT_NOTE``): a server that pads
        # what it echoes can put the cut inside a secret, and what comes before the
        # cut would show all of the secret but its last characters.
        out: list[str] = []
        pos = 0
        for begin, end, owner in self.cuts.parts(text):
            if begin < pos:
                continue
            out += [text[pos:begin], marker(owner)]
            if seen is not None:
                seen.append(owner)
            pos = end
        if not out:
            return text
        out.append(text[pos:])
        return "".join(out)

    def mask_value(self, value: object, seen: list[str]) -> object:
        """``value`` as ``masked_value`` masks it with these secrets."""
        return masked_value(value, lambda text: self.mask(text, seen))


class SecretGuard:
    """The secrets mcpd holds now, searched for in what servers send, and how many
    were masked for each server (by whose secret it was). Each is counted; the
    warnings about them are held to a budget per server, which can echo a secret it
    was given in every message it sends."""

    def __init__(self, known: KnownSecrets, clock: Callable[[], float] = time.monotonic) -> None:
        self._known = known
        self._search = _Search({})
        # The servers whose text is also searched for credential formats.
        self.patterns_for: frozenset[str] = frozenset()
        self.counts: dict[str, Counter[str]] = {}
        self._clock = clock
        self._said: dict[str, Throttle] = {}
        self.refresh()

    def refresh(self) -> None:
        """Take up the secrets held now; rebuilt only when they changed (a reload, an
        OAuth token refreshed, the endpoint's token replaced)."""
        # Built on the daemon's thread, with no worker thread: the build's work follows
        # the secrets' length (``spelling.tree_pattern``), no config secret is longer
        # than ``SECRET_FILE_LIMIT`` (``config.credentials.secrets``), so it takes
        # moments, and it is done only when the secrets changed.
        owners: dict[str, str] = {}
        for secret in self._known.held():
            if secret.value:
                owners.setdefault(secret.value, secret.where)
        if tuple(owners.items()) != self._search.key:
            self._search = _Search(owners)

    def configure(self, patterns_for: Iterable[str]) -> None:
        self.patterns_for = frozenset(patterns_for)
        self.refresh()

    # -- what servers send --

    def raw(self, alias: str, raw: Raw, what: str) -> Raw:
        """``raw`` (a JSON value as a server sent it), or a copy with every secret in
        it masked. Without one it is returned as it is: the same object."""
        pattern = self._search.pattern
        if (pattern is None or not pattern.found_in(raw)) and alias not in self.patterns_for:
            return raw
        return self._masked_raw(alias, raw, what)

    def finds(self, alias: str, raw: Raw | bytes) -> bool:
        """Whether ``raw`` (JSON text as a server sent it) holds something to mask: the
        form of a secret mcpd holds, or (for a server in ``patterns_for``) what may be
        a credential's format. Only then need its decoded value be walked (``value``)."""
        # On every call's path: a search of the bytes, at C speed, that finds nothing
        # in nearly every result.
        pattern = self._search.pattern
        if pattern is not None and pattern.found_in(raw):
            return True
        return alias in self.patterns_for and TRIGGER.search(raw) is not None

    def written(self, alias: str, value: object, what: str) -> bytes:
        """``value`` (made of what ``alias`` sent: decoded, and perhaps changed) as mcpd
        writes it, every secret in it masked. The server's bytes were searched as they
        came, but a secret spelled with escapes no encoder writes (``\\u0041`` for
        ``A``), a number written another way, or a secret mcpd joined by taking out what
        split it, is in none of them and plain in mcpd's: so what mcpd writes is
        searched, and only where something is found is it read back and walked to
        mask it."""
        encoded = _encode.encode(value)
        return self._rewritten(alias, encoded, what) if self._in_ours(alias, encoded) else encoded

    def reread(self, alias: str, raw: Raw, what: str) -> Raw:
        """``raw`` (JSON ``alias`` sent, which mcpd reads whole and writes anew: a
        listed item, a progress report) as it may be read: itself when what mcpd
        would write of it holds no secret, else that, masked (``written``)."""
        try:
            encoded = _encode.encode(_decode.decode(raw))
        except (msgspec.DecodeError, RecursionError):
            return raw  # what cannot be read is not written again either
        return Raw(self._rewritten(alias, encoded, what)) if self._in_ours(alias, encoded) else raw

    def _in_ours(self, alias: str, encoded: bytes) -> bool:
        """``finds``, in bytes mcpd wrote."""
        if self.in_written(encoded):
            return True
        return alias in self.patterns_for and TRIGGER.search(encoded) is not None

    def in_written(self, encoded: bytes) -> bool:
        """Whether JSON mcpd wrote holds a secret mcpd holds, as it is or as mcpd quotes
        it, in any form an encoder writes it: one search of the bytes, at C speed."""
        ours = self._search.ours
        return ours is not None and ours.found_in(encoded)

    def cut_in_written(self, encoded: bytes) -> bool:
        """Whether JSON mcpd wrote notes a cut while mcpd holds a secret: the text
        before the note may end with a secret's beginning, which ``mask_quietly``
        masks."""
        return self._search.values is not None and WRITTEN_NOTE.search(encoded) is not None

    def _rewritten(self, alias: str, encoded: bytes, what: str) -> bytes:
        decoded, encode = _read(encoded)
        masked = self.value(alias, decoded, what)
        return encoded if masked is decoded else encode(masked)

    def _masked_raw(self, alias: str, raw: Raw, what: str) -> Raw:
        pattern = self._search.pattern
        if (pattern is None or not pattern.found_in(raw)) and TRIGGER.search(raw) is None:
            return raw
        try:
            value, encode = _read(raw)
        except msgspec.DecodeError:
            return Raw(self.text(alias, bytes(raw).decode("utf-8", "replace"), what).encode())
        masked = self.value(alias, value, what)
        return raw if masked is value else Raw(encode(masked))

    def value(self, alias: str, value: object, what: str) -> object:
        """A decoded JSON value with every secret in its strings (keys too) masked:
        ``value`` itself when it holds none. Not walked at all while mcpd holds no
        secret and looks for no format in what ``alias`` sends."""
        if self._search.values is None and alias not in self.patterns_for:
            return value
        seen: list[str] = []
        masked = self._search.mask_value(value, seen)
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
        masked = self._search.mask(text, seen)
        if alias in self.patterns_for:
            masked = redact(masked, seen)
        if not seen:
            return text
        self._count(alias, seen, what)
        return masked

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds any secret mcpd holds (as it is, or its beginning where
        mcpd cut a server's words)."""
        search = self._search
        values = search.values
        if values is None:
            return False
        if values.search(text) is not None:
            return True
        return bool(search.cuts.parts(text))

    def mask_quietly(self, text: str) -> str:
        """``text`` masked without counting: for what mcpd writes itself."""
        return self._search.mask(text, None)

    def shown(self, row: Mapping[str, object]) -> dict[str, object]:
        """A status row (``mcpd status``, ``mcpd auth status``) with every string in it
        masked, without counting: a last pass over what mcpd shows, as ``LogMask`` is
        for the log, after what it quotes of a server was masked as it was kept."""
        if self._search.values is None:
            return dict(row)
        return {key: self._shown(value) for key, value in row.items()}

    def shown_row(self, row: RowT) -> RowT:
        """A typed status row with its every string masked as ``shown`` masks a dict's,
        nested fields and those added later included."""
        if self._search.values is None:
            return row
        masked = self.shown(msgspec.to_builtins(row))
        return msgspec.convert(masked, type(row))

    def _shown(self, value: object) -> object:
        # Its strings only: a number of mcpd's (a time, a pid) stays one.
        if isinstance(value, str):
            return self._search.mask(value, None)
        if isinstance(value, dict):
            return {key: self._shown(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._shown(item) for item in value]
        return value

    def rpc_error(self, alias: str, exc: rpc.RPCError, what: str) -> rpc.RPCError:
        """A server's JSON-RPC error as it sent it, or a copy with its message and data
        masked."""
        message = self.text(alias, exc.message, what)
        data = self.value(alias, exc.data, what)
        if message is exc.message and data is exc.data:
            return exc
        return exc.replaced(message, data)

    def _count(self, alias: str, seen: list[str], what: str) -> None:
        counts = self.counts.setdefault(alias, Counter())
        for where in seen:
            counts[where] += 1
        said = self._said.get(alias)
        if said is None:
            said = self._said[alias] = Throttle(clock=self._clock)
        for where in sorted(set(seen)):
            held = said.admit()
            if held is None:
                continue
            shown = kind_marker(where[len(FORMAT) :]) if where.startswith(FORMAT) else marker(where)
            logger.warning(
                "%s: masked %s in %s%s",
                alias,
                shown,
                what,
                f" ({held} more like this not logged)" if held else "",
                extra=log_extra(alias, "secret_masked", item=where),
            )

    def masked(self, alias: str) -> dict[str, int]:
        """How many secrets were masked in what ``alias`` sent, by whose they were."""
        return dict(self.counts.get(alias, {}))

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop the counts of servers no longer configured."""
        for alias in [a for a in self.counts if not keep(a)]:
            del self.counts[alias]
            self._said.pop(alias, None)


def _read(data: Raw | bytes) -> tuple[object, Callable[[object], bytes]]:
    """JSON ``data`` decoded, and how to write it again: its numbers as doubles, or
    where one is past a double's range (``1e400``), each as the decimal it is."""
    try:
        return _decode.decode(data), _encode.encode
    except msgspec.ValidationError:
        return _decode_exact.decode(data), _encode_exact.encode


def _redact_value(value: object, seen: list[str]) -> object:
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
