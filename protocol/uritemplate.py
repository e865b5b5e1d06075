"""RFC 6570 URI templates, as far as a router needs them: does a URI match a template?

A resource template (``file:///{+path}``, ``db://{table}/rows{?limit}``) says which
URIs a server will read. mcpd never expands templates itself; it only has to tell
which server's template a URI an agent sends belongs to, and whether two servers'
templates could ever claim the same URI. Both are answered from the template's
text alone: a regular expression per template, and its literal prefix.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

_EXPRESSION: Final = re.compile(r"\{([^{}]*)\}")
# What each operator's expansion may contain, as a regex for one expression.
_UNRESERVED: Final = r"(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})"
_SIMPLE: Final = rf"(?:{_UNRESERVED}|,)*"
_OPERATORS: Final = {
    "": _SIMPLE,
    "+": r"[^?#]*",
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)*",
    "/": r"(?:/[^?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)*",
}


class TemplateError(ValueError):
    """Not a URI template (an unclosed brace, an unknown operator)."""


def literal_prefix(template: str) -> str:
    """The text before the first expression: every expansion starts with it."""
    return template.split("{", 1)[0]


@lru_cache(maxsize=4096)
def pattern(template: str) -> re.Pattern[str]:
    """A regex that every expansion of ``template`` matches (and little else)."""
    out: list[str] = []
    pos = 0
    for m in _EXPRESSION.finditer(template):
        literal = template[pos : m.start()]
        if "{" in literal or "}" in literal:
            raise TemplateError(f"unbalanced brace in {template!r}")
        out.append(re.escape(literal))
        body = m.group(1)
        op = body[:1] if body[:1] in "+#./;?&" else ""
        if not body[len(op) :]:
            raise TemplateError(f"empty expression in {template!r}")
        out.append(_OPERATORS[op])
        pos = m.end()
    tail = template[pos:]
    if "{" in tail or "}" in tail:
        raise TemplateError(f"unbalanced brace in {template!r}")
    out.append(re.escape(tail))
    return re.compile("".join(out), re.DOTALL)


def matches(template: str, uri: str) -> bool:
    try:
        return pattern(template).fullmatch(uri) is not None
    except TemplateError:
        return False


def may_overlap(a: str, b: str) -> bool:
    """Whether some URI could match both templates.

    Exact overlap of two regular languages is more than a router needs; this is the
    safe side of it: expansions begin with the literal prefix, so templates whose
    prefixes differ before either ends can never share a URI.
    """
    pa, pb = literal_prefix(a), literal_prefix(b)
    return pa.startswith(pb) or pb.startswith(pa)
