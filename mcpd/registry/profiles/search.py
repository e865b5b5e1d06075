"""Tool search: a ranked index over the aggregated tools, for the "search" discovery mode.

Hosts cap how many tools they take (VS Code 128, Cursor 40 or 80) and a model picks worse
from 200 tools than from 20. In search mode an agent's ``tools/list`` holds only the three
meta-tools of ``mcpd.metatools`` and the model finds the rest by asking.

Ranking is BM25F: a term's frequency is summed over the fields with a weight and a length
normalisation per field, then saturated once, so a word in the name outweighs the same
word in an argument's description without one long description drowning the rest.

==============  ======  ===================================================================
field           weight  text
==============  ======  ===================================================================
name            3.0     the tool's name (the server's, and the local one without prefix)
title           2.0     ``title``
server          1.5     the server's alias: "git" finds every tool of the git server
description     1.0     the server's description (not mcpd's ``[alias]`` note)
arguments       0.5     property names, their titles, descriptions and enum values
==============  ======  ===================================================================

Text becomes terms by splitting on anything but letters and digits and on camelCase
humps (``getTinyImage``, ``list_directory``, ``get-sum`` and ``a.b`` all split), lower
case, a small stop-word list, and a light suffix stemmer (plurals, -ing, -ed, -ion, a
final e and a doubled consonant) so "listing files" meets ``list_directory`` and
"created" meets "create". A query term also matches, at a discount, its synonyms from a
short list of generic groups (file/document, delete/remove, create/add/new,
find/search/lookup, show/get/read, ...) and terms it is a prefix of or that are a prefix
of it (env/environment, repo/repository); each query term counts once, at its best
match. A query equal to a tool's name ranks that tool first. Ties go by name, so the
same index and query always give the same list.
"""

from __future__ import annotations

import gc
import math
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator
from typing import Any, Final

import msgspec

K1: Final = 1.2
SYNONYM_WEIGHT: Final = 0.5
PREFIX_WEIGHT: Final = 0.35
# (weight, length normalisation b) per field; names are short, so barely normalised.
FIELDS: Final[dict[str, tuple[float, float]]] = {
    "name": (3.0, 0.3),
    "title": (2.0, 0.3),
    "server": (1.5, 0.0),
    "description": (1.0, 0.75),
    "arguments": (0.5, 0.75),
}
_SCHEMA_DEPTH: Final = 3  # nested objects deeper than this add nothing a query would use
# Characters of a tool's description, and of its schema's words, that are indexed: what
# a query finds is said at the start, and a server's text is as long as it makes it,
# while the index is built on the event loop, again whenever a profile's tools change.
INDEXED_CHARS: Final = 2048

# A plural acronym (URLs, IDs), an upper-case run before a capitalised word (HTTPServer),
# a capital and what follows (camelCase), upper-case runs, digits; letters outside A-Z
# count as lower case, so "café" stays one word.
_WORD: Final = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W\dA-Z_]+|[A-Z]+|\d+")
_VOWEL: Final = re.compile(r"[aeiouy]")
_STOP: Final = (
    "a an the of to for in on at by with from and or nor is are was were be been being it "
    "its this that these those me my i you your we our us he she they them what which who "
    "whom how can could would should will shall do does did please some any all into onto "
    "about as if then than there here so just also want need like let lets"
)
STOP_WORDS: Final = frozenset(_STOP.split())
# Generic words people use for the same action or thing; nothing specific to one server.
SYNONYM_GROUPS: Final = (
    ("file", "document", "doc"),
    ("folder", "directory", "dir"),
    ("delete", "remove", "erase", "destroy", "drop"),
    ("create", "add", "new", "make"),
    ("find", "search", "lookup", "locate", "query"),
    ("show", "get", "read", "view", "display", "fetch", "retrieve"),
    ("list", "enumerate"),
    ("update", "edit", "modify", "change"),
    ("write", "save", "store"),
    ("run", "execute", "invoke", "launch"),
    ("move", "rename"),
    ("copy", "duplicate"),
    ("image", "picture", "photo"),
)


def stem(word: str) -> str:
    """A light suffix stemmer: consistent rather than linguistically right
    ("create", "created", "creation" -> "creat"; "listing", "lists" -> "list")."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, keep in (("ing", 3), ("ed", 3), ("ion", 4)):
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if len(base) >= keep and _VOWEL.search(base):
                w = base
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
        w = w[:-1]
    return w


_RUN: Final = re.compile(r"[^\W_]+")
# A run of letters and digits -> its terms (none for a stop word). Words repeat across
# descriptions far more than texts do, so this is where tokenising saves its time;
# bounded, since queries come from agents.
_runs: dict[str, tuple[str, ...]] = {}
_RUN_CACHE: Final = 100_000
_CACHED_RUN: Final = 64  # longer runs are no words worth keeping: an agent's junk


def words(text: str) -> list[str]:
    """Lower-cased words, split at separators and camelCase, stop words kept."""
    return [m.lower() for m in _WORD.findall(text)]


def _split(run: str) -> tuple[str, ...]:
    out = []
    for word in _WORD.findall(run):
        if len(word) > 2 and word[-1] == "s" and word[:-1].isupper():
            word = word[:-1]  # URLs -> url
        w = word.lower()
        if w not in STOP_WORDS and (len(w) > 1 or w.isdigit()):
            out.append(stem(w))
    terms = tuple(out)
    if len(_runs) < _RUN_CACHE and len(run) <= _CACHED_RUN:
        _runs[run] = terms
    return terms


def terms(text: str) -> list[str]:
    """Index terms: words without stop words and single letters, stemmed."""
    out: list[str] = []
    get = _runs.get
    for run in _RUN.findall(text):
        found = get(run)
        if found is None:
            found = _split(run)
        if found:
            out += found
    return out


_SYNONYMS: Final[dict[str, tuple[str, ...]]] = {}
for _group in SYNONYM_GROUPS:
    _stemmed = tuple(dict.fromkeys(stem(w) for w in _group))
    for _s in _stemmed:
        _SYNONYMS[_s] = tuple(x for x in _stemmed if x != _s)


class ToolDoc(msgspec.Struct, frozen=True):
    """What the index knows of one tool."""

    name: str  # the local name agents call
    server: str  # the alias
    original: str = ""  # the server's own name
    title: str = ""
    description: str = ""  # the server's own, without mcpd's notes
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)


class Hit(msgspec.Struct, frozen=True):
    name: str
    server: str
    score: float
    summary: str  # the description's first sentence, for a one-line listing


def first_sentence(description: str, limit: int = 160) -> str:
    """The first sentence (or line) of a description, at most ``limit`` characters."""
    text = " ".join(description.split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut is not None:
        text = text[: cut.start()]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _schema_words(schema: Any, out: list[str], depth: int = 0) -> None:
    """Property names, nested titles and descriptions, and enum values of a schema."""
    if not isinstance(schema, dict) or depth > _SCHEMA_DEPTH:
        return
    if depth:
        for key in ("title", "description"):
            if isinstance(text := schema.get(key), str):
                out.append(text)
    # What a server sends is any JSON: a list where a schema has one is not a given.
    enum = schema.get("enum")
    for value in enum if isinstance(enum, list) else ():
        if isinstance(value, str):
            out.append(value)
    props = schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            out.append(str(name))
            _schema_words(sub, out, depth + 1)
    if "items" in schema:
        _schema_words(schema["items"], out, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        subs = schema.get(key)
        for sub in subs if isinstance(subs, list) else ():
            _schema_words(sub, out, depth + 1)


def _fields(doc: ToolDoc) -> dict[str, list[str]]:
    server = terms(doc.server)
    # The server's own name, then what the local name adds without mcpd's prefix words
    # (they differ when the config renames a tool); each word once, names are not prose.
    local = [t for t in terms(doc.name) if t not in server and t != "mcp"]
    schema: list[str] = []
    _schema_words(doc.input_schema, schema)
    return {
        "name": list(dict.fromkeys(terms(doc.original) + local)),
        "title": terms(doc.title[:INDEXED_CHARS]),
        "server": server,
        "description": terms(doc.description[:INDEXED_CHARS]),
        "arguments": terms(" ".join(schema)[:INDEXED_CHARS]),
    }


class ToolIndex:
    """An immutable index; build a new one when the tool list changes (cheap for the
    texts of real tools, and bounded for any: ``INDEXED_CHARS``)."""

    def __init__(self, tools: Iterable[ToolDoc]) -> None:
        # Building makes no cycles, only many small lists the collector would scan
        # again and again (a fifth of the time at 10,000 tools).
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._build(tools)
        finally:
            if collecting:
                gc.enable()

    def _build(self, tools: Iterable[ToolDoc]) -> None:
        self._docs: list[ToolDoc] = sorted(tools, key=lambda d: d.name)
        self._by_name: dict[str, int] = {}
        # Each tool's own name first: no other tool takes it, whatever its server
        # named it (a tool called "mcp__bank__transfer" on another server).
        for i, doc in enumerate(self._docs):
            self._by_name.setdefault(doc.name, i)
        for i, doc in enumerate(self._docs):
            self._by_name.setdefault(doc.name.lower(), i)
        for i, doc in enumerate(self._docs):
            if doc.original:
                self._by_name.setdefault(doc.original.lower(), i)
        analysed = [_fields(d) for d in self._docs]
        n = len(analysed)
        avg = {f: (sum(len(a[f]) for a in analysed) / n if n else 0.0) or 1.0 for f in FIELDS}
        # term -> (tools, their BM25F pseudo-frequencies); saturation and idf are applied
        # at query time, to the few terms a query has. Two flat lists rather than pairs:
        # ints and floats are no work for the garbage collector, a million tuples are.
        self._postings: dict[str, tuple[list[int], list[float]]] = {}
        postings = self._postings
        for i, fields in enumerate(analysed):
            tf: dict[str, float] = {}
            for field, toks in fields.items():
                if toks:
                    weight, b = FIELDS[field]
                    norm = weight / (1.0 - b + b * len(toks) / avg[field])
                    for term in toks:
                        tf[term] = tf.get(term, 0.0) + norm
            for term, f in tf.items():
                row = postings.get(term)
                if row is None:
                    postings[term] = ([i], [f])
                else:
                    row[0].append(i)
                    row[1].append(f)
        self._n = n
        self._vocabulary = sorted(postings)
        # The lengths of the index's terms: a query term's prefixes are looked up at
        # these lengths alone, so a long word in a query costs what the index holds,
        # not the square of its length.
        self._lengths = sorted({len(t) for t in postings})

    def __len__(self) -> int:
        return len(self._docs)

    def get(self, name: str) -> ToolDoc | None:
        i = self._by_name.get(name)
        return self._docs[i] if i is not None else None

    def search(self, query: str, k: int = 10, allowed: Collection[str] | None = None) -> list[Hit]:
        """The ``k`` best tools for ``query``, best first; with ``allowed``, only tools
        whose local name is in it (a profile's view)."""
        if k <= 0:
            return []
        scores: dict[int, float] = {}
        for term in dict.fromkeys(terms(query)):
            best: dict[int, float] = {}
            for variant, weight in self._variants(term):
                row = self._postings.get(variant)
                if row is None:
                    continue
                ids, freqs = row
                idf = math.log(1.0 + (self._n - len(ids) + 0.5) / (len(ids) + 0.5))
                scale = weight * idf * (K1 + 1.0)
                for i, f in zip(ids, freqs, strict=True):
                    s = scale * f / (f + K1)
                    if s > best.get(i, 0.0):
                        best[i] = s
            for i, s in best.items():
                scores[i] = scores.get(i, 0.0) + s
        exact = self._by_name.get(query.strip())
        if exact is None:
            exact = self._by_name.get(query.strip().lower())
        if exact is not None:
            scores[exact] = scores.get(exact, 0.0) + 1000.0
        docs = self._docs
        ranked = sorted(
            (
                (-s, docs[i].name, i)
                for i, s in scores.items()
                if allowed is None or docs[i].name in allowed
            ),
        )[:k]
        return [
            Hit(docs[i].name, docs[i].server, round(-neg, 4), first_sentence(docs[i].description))
            for neg, _, i in ranked
        ]

    def _variants(self, term: str) -> Iterator[tuple[str, float]]:
        yield term, 1.0
        for syn in _SYNONYMS.get(term, ()):
            yield syn, SYNONYM_WEIGHT
        if len(term) < 3 or term.isdigit():
            return
        vocab = self._vocabulary
        # Index terms that extend this one (repo -> repository), then ones it extends.
        at = bisect_left(vocab, term)
        while at < len(vocab) and vocab[at].startswith(term):
            if vocab[at] != term:
                yield vocab[at], PREFIX_WEIGHT
            at += 1
        for cut in self._lengths:
            if cut >= len(term):
                break
            if cut >= 3 and term[:cut] in self._postings:
                yield term[:cut], PREFIX_WEIGHT
