"""RFC 6570 URI templates, as far as a router needs them: does a URI match a template?

A resource template (``file:///{+path}``, ``db://{table}/rows{?limit}``) says which
URIs a server will read. mcpd never expands templates itself; it only has to tell
which server's template a URI an agent sends belongs to, and whether two servers'
templates could ever claim the same URI. Both are answered from the template's
text alone: a matcher per template, and its literal prefix.

The URIs come from agents and from servers' results, the templates from servers, so
what a match costs must be bounded whatever either holds. A template is parsed into parts,
each a literal or a small deterministic automaton for one expression, and a URI is
matched part by part, carrying the set of positions where the parts so far can end.
An expression's automaton visits each (position, state) pair at most once, however
many positions it starts from, and a literal is tried once per position: nothing is
ever retried, so a match takes at most ``(len(uri) + 1) * (5 * expressions + 1)``
steps (``Verdict.steps`` counts them). A literal is compared with ``str.startswith``,
which reads no further than the literal or the URI ends.
"""

from __future__ import annotations

import string
from functools import lru_cache
from typing import Final, NamedTuple

# Far beyond any URI or template a real server writes; past them nothing is scanned.
MAX_URI: Final = 8192  # characters: a longer URI matches no template
MAX_EXPRESSIONS: Final = 32  # per template: a template with more is a TemplateError


class TemplateError(ValueError):
    """Not a URI template mcpd can match (an unclosed brace, an empty expression, too
    many expressions)."""


class _Move(NamedTuple):
    """One transition: on a character of ``chars`` (of all but those, when ``but``)."""

    chars: frozenset[str]
    but: bool
    target: int


def _on(chars: str, target: int) -> _Move:
    return _Move(frozenset(chars), False, target)


def _off(chars: str, target: int) -> _Move:
    return _Move(frozenset(chars), True, target)


# One state of an expression's automaton: whether an expansion may end there, and
# the moves out of it (on disjoint characters, so one path per start).
_State = tuple[bool, tuple[_Move, ...]]
_Automaton = tuple[_State, ...]


def _led(lead: str, body_but: str) -> _Automaton:
    """Nothing, or ``lead`` followed by any run of characters other than ``body_but``.

    This is the whole of ``(lead body*)*`` too, since the body takes ``lead`` for
    each operator below: a second item reads as more of the first.
    """
    return ((True, (_on(lead, 1),)), (True, (_off(body_but, 1),)))


# What each operator's expansion may contain (the operator is the expression's
# first character; with none it is a simple expansion, which percent-encodes the
# rest).
_OPERATORS: Final[dict[str, _Automaton]] = {
    "": (
        (True, (_on(string.ascii_letters + string.digits + "-._~,", 0), _on("%", 1))),
        (False, (_on(string.hexdigits, 2),)),
        (False, (_on(string.hexdigits, 0),)),
    ),
    "+": ((True, (_off("?#", 0),)),),
    "#": _led("#", ""),
    ".": _led(".", "/?#"),
    "/": _led("/", "?#"),
    ";": _led(";", "/?#"),
    "?": _led("?", "#"),
    "&": _led("&", "#"),
}

_Part = str | _Automaton  # a literal, or one expression


class Verdict(NamedTuple):
    matched: bool
    steps: int  # the work done: (position, state) pairs visited, literals tried
    # The budget ran out before the match was decided (``matched`` is then False).
    exhausted: bool = False


def _quoted(template: str) -> str:
    return repr(template) if len(template) <= 80 else repr(template[:80]) + "..."


def _parts(template: str) -> tuple[_Part, ...]:
    parts: list[_Part] = []
    expressions = 0
    pos = 0
    while True:
        start = template.find("{", pos)
        literal = template[pos:] if start < 0 else template[pos:start]
        if "}" in literal:
            raise TemplateError(f"unbalanced brace in {_quoted(template)}")
        if literal:
            parts.append(literal)
        if start < 0:
            return tuple(parts)
        end = template.find("}", start)
        body = template[start + 1 : end]
        if end < 0 or "{" in body:
            raise TemplateError(f"unbalanced brace in {_quoted(template)}")
        op = body[:1] if body[:1] in "+#./;?&" else ""
        if not body[len(op) :]:
            raise TemplateError(f"empty expression in {_quoted(template)}")
        expressions += 1
        if expressions > MAX_EXPRESSIONS:
            raise TemplateError(f"more than {MAX_EXPRESSIONS} expressions in {_quoted(template)}")
        parts.append(_OPERATORS[op])
        pos = end + 1


def _expand(automaton: _Automaton, uri: str, starts: list[int]) -> tuple[list[int], int]:
    """Where one expression can end, begun at any of ``starts``, and the steps taken.

    Each path is followed until it meets a (position, state) pair an earlier path
    went through: from there both go the same way, so it stops.
    """
    n = len(uri)
    width = len(automaton)
    seen = bytearray((n + 1) * width)  # (position, state) at index position * width + state
    ends: set[int] = set()
    steps = len(starts)
    for pos in starts:
        state = 0
        while not seen[pos * width + state]:
            seen[pos * width + state] = 1
            steps += 1
            accepting, moves = automaton[state]
            if accepting:
                ends.add(pos)
            if pos == n:
                break
            c = uri[pos]
            for chars, but, target in moves:
                if (c in chars) is not but:
                    state = target
                    pos += 1
                    break
            else:
                break
    return sorted(ends), steps


class Template:
    """A parsed template, ready to match URIs."""

    __slots__ = ("_parts",)

    def __init__(self, text: str) -> None:
        self._parts = _parts(text)

    def match(self, uri: str, budget: int | None = None) -> Verdict:
        """Whether ``uri`` is an expansion of the template. With a ``budget``, the
        match gives up once it has taken more steps than that (checked after each
        part, so it may go over by one expression's worth)."""
        if len(uri) > MAX_URI:
            return Verdict(False, 0)
        ends = [0]
        steps = 0
        for part in self._parts:
            if isinstance(part, str):
                steps += len(ends)
                ends = [p + len(part) for p in ends if uri.startswith(part, p)]
            else:
                ends, spent = _expand(part, uri, ends)
                steps += spent
            if not ends:
                return Verdict(False, steps)
            if budget is not None and steps > budget:
                return Verdict(False, steps, exhausted=True)
        return Verdict(len(uri) in ends, steps)


@lru_cache(maxsize=4096)
def parse(template: str) -> Template:
    """The template ready to match; TemplateError if it is none mcpd can match."""
    return Template(template)


def matches(template: str, uri: str) -> bool:
    try:
        return parse(template).match(uri).matched
    except TemplateError:
        return False


def literal_prefix(template: str) -> str:
    """The text before the first expression: every expansion starts with it."""
    return template.split("{", 1)[0]


def may_overlap(a: str, b: str) -> bool:
    """Whether some URI could match both templates.

    Exact overlap of two regular languages is more than a router needs; this is the
    safe side of it: expansions begin with the literal prefix, so templates whose
    prefixes differ before either ends can never share a URI.
    """
    pa, pb = literal_prefix(a), literal_prefix(b)
    return pa.startswith(pb) or pb.startswith(pa)
