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
ever retried. ``MatchVerdict.steps`` counts the work: a step per pair visited, and per
literal tried, a step and one for each character it may compare. A match takes at most
``(len(uri) + 1) * (len(template) + 2 * expressions + 1)`` steps, and with a budget
it stops where the next step would go over it.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Final, NamedTuple
from urllib.parse import unquote

from ..shown.visible import quote
from . import uri_spellings

# Far beyond any URI or template a real server writes; past them nothing is scanned.
MAX_URI: Final = 8192  # characters: a longer URI matches no template
MAX_EXPRESSIONS: Final = 32  # per template: a template with more is a TemplateError
MAX_TEMPLATE: Final = 1024  # characters: a longer template is a TemplateError


class TemplateError(ValueError):
    """Not a URI template mcpd can match (an unclosed brace, an empty expression, too
    many expressions, too long)."""


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


class MatchVerdict(NamedTuple):
    matched: bool
    steps: int  # the work done: (position, state) pairs visited, literals tried
    # The budget would have run out before the match was decided (``matched`` is then
    # False, and ``steps`` what was spent, never more than the budget).
    exhausted: bool = False


def _quoted(template: str) -> str:
    return quote(template, 80)


def _parts(template: str) -> tuple[_Part, ...]:
    if len(template) > MAX_TEMPLATE:
        raise TemplateError(f"longer than {MAX_TEMPLATE} characters: {_quoted(template)}")
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


def _expand(
    automaton: _Automaton, uri: str, starts: list[int], limit: int
) -> tuple[list[int], int] | None:
    """Where one expression can end, begun at any of ``starts``, and the steps taken;
    None if that would take more than ``limit`` steps.

    Each path is followed until it meets a (position, state) pair an earlier path
    went through: from there both go the same way, so it stops.
    """
    n = len(uri)
    width = len(automaton)
    seen = bytearray((n + 1) * width)  # (position, state) at index position * width + state
    ends: set[int] = set()
    steps = len(starts)
    if steps > limit:
        return None
    for pos in starts:
        state = 0
        while not seen[pos * width + state]:
            seen[pos * width + state] = 1
            steps += 1
            if steps > limit:
                return None
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


def _literal(part: str, uri: str, starts: list[int], limit: int) -> tuple[list[int], int] | None:
    """Where ``part`` ends, read at any of ``starts``, and the steps taken (a step per
    start, and the literal's length where it fits in the rest of the URI, the most
    a comparison there reads); None if that would take more than ``limit``."""
    n, size = len(uri), len(part)
    ends: list[int] = []
    steps = 0
    for pos in starts:
        fits = pos + size <= n
        steps += 1 + size if fits else 1
        if steps > limit:
            return None
        if fits and uri.startswith(part, pos):
            ends.append(pos + size)
    return ends, steps


class Template:
    """A parsed template, ready to match URIs."""

    __slots__ = ("_parts", "prefix", "text")

    def __init__(self, text: str) -> None:
        self._parts = _parts(text)
        self.text = text
        # The text before the first expression: every expansion starts with it.
        self.prefix = literal_prefix(text)

    def match(self, uri: str, budget: int | None = None) -> MatchVerdict:
        """Whether ``uri`` is an expansion of the template. With a ``budget``, the
        match gives up before it would take more steps than that."""
        if len(uri) > MAX_URI:
            return MatchVerdict(False, 0)
        limit = budget if budget is not None else (1 << 62)
        ends = [0]
        steps = 0
        for part in self._parts:
            if isinstance(part, str):
                done = _literal(part, uri, ends, limit - steps)
            else:
                done = _expand(part, uri, ends, limit - steps)
            if done is None:
                return MatchVerdict(False, limit, exhausted=True)  # spent, or as good as
            ends, spent = done
            steps += spent
            if not ends:
                return MatchVerdict(False, steps)
        return MatchVerdict(len(uri) in ends, steps)


@lru_cache(maxsize=4096)
def parse(template: str) -> Template:
    """The template ready to match; TemplateError if it is none mcpd can match."""
    return Template(template)


def shape(template: str) -> str:
    """The template with its variables' names left out and each expression's operator
    kept (``db://{}/rows{?}``): templates of one shape match the same URIs. A
    template mcpd cannot match is a shape of its own."""
    try:
        _parts(template)
    except TemplateError:
        return template
    return _shaped(template)


def path_shape(template: str) -> str:
    """The shape of the template's path part, its scheme in lower case: all of it
    before a query or a fragment begins (a literal ``?`` or ``#``, or an expression
    that expands to one: ``{?}``, ``{&}``, ``{#}``). Templates of one path shape read
    the same URIs but for what follows the path (``notes://{id}``, ``NOTES://{n}{?v}``).
    A template mcpd cannot match is a path shape of its own."""
    try:
        _parts(template)
    except TemplateError:
        return template
    out = _scheme_folded(_shaped(template))
    for at, char in enumerate(out):
        if char in "?#":
            # In a shape a brace opens an expression: ``{?}`` is cut before it.
            return out[: at - 1] if out[at - 1 : at] == "{" else out[:at]
        if out.startswith("{&}", at):
            return out[:at]
    return out


def _shaped(template: str) -> str:
    """``shape`` of a template known to parse."""
    out: list[str] = []
    pos = 0
    while (start := template.find("{", pos)) >= 0:
        end = template.find("}", start)
        op = template[start + 1 : start + 2]
        out += [template[pos:start], "{", op if op in "+#./;?&" else "", "}"]
        pos = end + 1
    out.append(template[pos:])
    return "".join(out)


_AUTHORITY_END: Final = re.compile(r"[/?#]")


def reach(template: str) -> str:
    """The literal prefix read as ``uri_spellings.read_as`` reads a URI, as far as that
    holds for every URI it begins: the scheme in lower case, and an authority the
    prefix holds whole read as the scheme's server reads it (a case-blind host in
    lower case, a ``file`` URI's ``localhost`` as none), as is a ``file`` path with no
    authority before it. Every URI the template expands to, so read, begins with it.
    Two templates may share a URI only when one's reach begins the other's; whether
    they do is not asked, so a template mcpd cannot match has a reach too."""
    prefix = _scheme_folded(literal_prefix(template))
    scheme, colon, rest = prefix.partition(":")
    if not colon or scheme not in uri_spellings.CASE_BLIND_HOSTS:
        return prefix
    if not rest.startswith("//"):
        if scheme != "file":
            return prefix
        if rest in ("", "/"):
            # An expansion of ``file:/{+p}`` may still name an authority.
            return "file:"
        return "file:///" + rest.lstrip("/")
    end = _AUTHORITY_END.search(rest, 2)
    if end is None:
        # An authority cut short: a host's case is all that is sure, and not that a
        # file URI's is other than localhost, nor what an escape cut short decodes to.
        if scheme == "file" or "%" in rest:
            return scheme + "://"
        return scheme + ":" + rest.lower()
    written = rest[: end.start()]
    return scheme + ":" + uri_spellings.authority(scheme, unquote(written)) + rest[end.start() :]


def read_form(template: str) -> str:
    """The template with its literal prefix as ``reach`` reads it: a URI that
    ``uri_spellings.read_as`` reads as an expansion of the template, in any spelling of its
    scheme or authority, matches it (``FILE://localhost/data/{+p}`` reads as
    ``file:///data/{+p}``, which matches ``file:///data/x`` however ``FILE`` and
    ``localhost`` were written in it)."""
    return reach(template) + template[len(literal_prefix(template)) :]


# A scheme is ASCII: only ASCII letters are folded, one for one.
_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _scheme_folded(text: str) -> str:
    """``text`` with what may be a scheme (all before the first ``:`` or expression)
    in lower case."""
    end = len(text)
    for stop in ":{":
        at = text.find(stop)
        if 0 <= at < end:
            end = at
    return text[:end].translate(_LOWER) + text[end:]


def literal_prefix(template: str) -> str:
    """The text before the first expression: every expansion starts with it."""
    return template.split("{", 1)[0]
