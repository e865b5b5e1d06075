"""The spellings of one URI a server may read as the same resource.

A profile's ``resources`` patterns are globs over a server's URIs as written. A server
reads more spellings than one as the same resource: a URL parser drops tabs and line
breaks anywhere and blanks at the ends, takes ``\\`` for ``/``, decodes ``%63`` as
``c``, resolves ``.`` and ``..``, and a path library folds ``//``; many servers then
ignore a query or fragment they do not use. ``forms`` gives the URI as written and as
such a reading would have it (a scheme is the same in any case; an authority is left
as written, as a server's own scheme may tell cases apart), so that a pattern meant to
keep one resource out keeps out every spelling of it, and one that lets resources in
lets in only what it admits however spelled. Nothing here decides what a server does
with a URI: the forms only widen what a pattern is held against.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

# scheme ":" ["//" authority] path ["?" query] ["#" fragment]
_PARTS: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(//[^/?#]*)?([^?#]*)(\?[^#]*)?(#.*)?", re.S)
_DROPPED: Final = str.maketrans("", "", "\t\n\r")
_BLANKS: Final = "".join(map(chr, range(0x21)))
_SLASHES: Final = re.compile(r"/{2,}")


def forms(uri: str) -> tuple[str, str, str]:
    """``uri`` as written, as a server's reading may have it (``read_as``), and that
    without its query."""
    text = unquote(uri.translate(_DROPPED).strip(_BLANKS)).replace("\\", "/")
    parts = _PARTS.fullmatch(text)
    if parts is None:
        plain = _without_dots(_SLASHES.sub("/", text))
        return uri, plain, plain
    scheme, authority, path, query, _fragment = parts.groups()
    bare = scheme.lower() + ":" + (authority or "") + _without_dots(_SLASHES.sub("/", path))
    return uri, bare + (query if query and query != "?" else ""), bare


def read_as(uri: str) -> str:
    """``uri`` as a server's reading may have it: without tabs, line breaks and blanks
    at the ends, percent-escapes decoded, ``\\`` as ``/``, its scheme in lower case, its
    path without ``.``, ``..`` or repeated slashes, its fragment and an empty query
    dropped."""
    return forms(uri)[1]


def _without_dots(path: str) -> str:
    """``path`` with its ``.`` and ``..`` segments resolved, as RFC 3986 (5.2.4) does."""
    if "." not in path:
        return path
    kept: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                kept.append("")
        elif segment == "..":
            if len(kept) > 1 or (kept and kept[0] != ""):
                kept.pop()
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/".join(kept)
