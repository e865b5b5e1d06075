"""The spellings of one URI a server may read as the same resource.

A profile's ``resources`` patterns are globs over a server's URIs as written. A server
reads more spellings than one as the same resource. A URL parser drops tabs and line
breaks anywhere and blanks at the ends, takes ``\\`` for ``/``, splits off the query and
the fragment where the URI as written has ``?`` and ``#``, then decodes ``%63`` as
``c`` in the path and resolves ``.`` and ``..`` there, whether written plainly or
escaped; a path library folds ``//``. A ``file`` URI names no host when it names
``localhost`` (in any case, and to some readings any host at all), and ``file:/p`` and
``file:p`` are ``file:///p``; the host of a web URL is the same in any case, with a
name before an ``@``, a dot at its end or the port its scheme takes by default, and
in fullwidth letters as in plain ones (a URL parser maps them as IDNA does). Many
servers then ignore a query or fragment they do not use, and some decode a URI before
they split it, so that an escaped ``?`` or ``#`` ends its path.

``forms`` gives the URI as written and as such readings would have it (a scheme is the
same in any case; the authority of a scheme not known to be case-blind is left as
written, as a server's own scheme may tell cases apart), so that a pattern meant to
keep one resource out keeps out every spelling of it, and one that lets resources in
lets in only what it admits however spelled. Nothing here decides what a server does
with a URI: the forms only widen what a pattern is held against.

A server that serves files may read no more of a URI than its path, whatever its
scheme, or take one without a scheme for a path as a whole: ``paths`` gives the paths
such a server may open for a URI, so that a pattern meant to keep a file out keeps
out its path however it comes. A URL parser splits ``;params`` off a path (Python's
off its last segment, a servlet container's off each), and a server may cut it at
its first ``;``. A relative path is opened from the server's working directory, which
nothing here knows: ``climbs`` says whether one leaves it, and so may name any file.
Other names of a file (a link, ``/proc/self/root``) are the filesystem's, not the
URI's.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Callable
from typing import Final, NamedTuple
from urllib.parse import unquote

# scheme ":" ["//" authority] path ["?" query] ["#" fragment]
_PARTS: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(//[^/?#]*)?([^?#]*)(\?[^#]*)?(#.*)?", re.S)
_DROPPED: Final = str.maketrans("", "", "\t\n\r")
_BLANKS: Final = "".join(map(chr, range(0x21)))
_SLASHES: Final = re.compile(r"/{2,}")
_FILE_HOST: Final = re.compile(r"^file://[^/]+")
_QUERY_OR_FRAGMENT: Final = re.compile(r"[?#]")
# Schemes whose authority is a host name, which no case tells apart.
CASE_BLIND_HOSTS: Final = frozenset({"http", "https", "ws", "wss", "ftp", "file"})
# The port each of those takes when a URI names none.
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
# What IDNA maps that NFKC leaves: an ideographic full stop is a dot, a soft hyphen
# is nothing.
_IDNA_MAPPED: Final = str.maketrans({"\u3002": ".", "\u00ad": None})
_HOST_MAX: Final = 253
_LABEL_MAX: Final = 63


class Forms(NamedTuple):
    written: str
    # As a server's reading may have it: first ``read_as``, then, where it differs,
    # as a server that decodes before it splits reads it.
    read: tuple[str, ...]
    # Those readings without their query.
    bare: tuple[str, ...]


def forms(uri: str) -> Forms:
    """``uri`` as written, as servers' readings may have it, and those without their
    query."""
    text = _cleaned(uri)
    readings = [_reading(text, unquote), _reading(unquote(text).replace("\\", "/"), _as_is)]
    # A file URI's host, whatever it says, may name this machine to a server: a URL
    # parser maps look-alike letters (fullwidth, a soft hyphen) to ``localhost`` and
    # drops it, and Python's urllib takes any host that resolves here (``127.1``).
    readings += [(_FILE_HOST.sub("file://", r), _FILE_HOST.sub("file://", b)) for r, b in readings]
    return Forms(
        uri,
        tuple(dict.fromkeys(r for r, _ in readings)),
        tuple(dict.fromkeys(b for _, b in readings)),
    )


def paths(uri: str) -> tuple[str, ...]:
    """The paths a server that reads ``uri`` by its path alone may open: under any
    scheme, the path of each reading ``forms`` makes (a ``file`` URI's from the root,
    as ``forms`` reads it), and, where the URI names an authority, that authority and
    the path as one (``x://srv/p`` stripped of its scheme is ``//srv/p``, which is
    ``/srv/p``); a URI with no scheme as a whole and up to a ``?`` or ``#`` in it, as
    a URL parser splits it; each also without its ``;params``. A relative path stays
    relative, its ``..`` dropped where it climbs: see ``climbs``."""
    return tuple(dict.fromkeys(_path(opened) for opened in _opened(uri)))


def climbs(uri: str) -> bool:
    """Whether a server that reads ``uri`` by its path alone may open a relative path
    that climbs out of its working directory (``../p``, ``a/../../p``): from there,
    enough ``..`` reach any file, and where fewer land depends on a directory the URI
    does not name."""
    return any(_climbs(opened) for opened in _opened(uri))


def _opened(uri: str) -> list[str]:
    """The paths of ``paths`` decoded, before their dots and slashes are read."""
    text = _cleaned(uri)
    found = [*_paths(text, unquote), *_paths(unquote(text).replace("\\", "/"), _as_is)]
    return list(dict.fromkeys(found))


def _paths(text: str, decode: Callable[[str], str]) -> list[str]:
    parts = _PARTS.fullmatch(text)
    if parts is None:
        written = [text, _QUERY_OR_FRAGMENT.split(text, 1)[0]]
    else:
        scheme, written_authority, path, _query, _fragment = parts.groups()
        # ``forms`` reads ``file:p`` from the root; a server that takes the path
        # alone opens ``p`` from its working directory.
        written = [path, "/" + path.lstrip("/")] if scheme.lower() == "file" else [path]
        if written_authority:
            written.append(written_authority + path)
    return [decode(p) for w in written for p in _without_params(w)]


def _without_params(path: str) -> list[str]:
    """``path`` as written, without the ``;params`` of its last segment (Python's
    ``urlparse``), of each segment (a servlet's reading) and cut at its first ``;``."""
    if ";" not in path:
        return [path]
    last = path.rfind("/") + 1
    return [
        path,
        path[:last] + path[last:].split(";", 1)[0],
        "/".join(segment.split(";", 1)[0] for segment in path.split("/")),
        path.split(";", 1)[0],
    ]


def _climbs(decoded: str) -> bool:
    path = decoded.replace("\\", "/")
    if path.startswith("/"):
        return False
    depth = 0
    for segment in path.split("/"):
        if segment == "..":
            depth -= 1
            if depth < 0:
                return True
        elif segment not in ("", "."):
            depth += 1
    return False


def read_as(uri: str) -> str:
    """``uri`` as a server's reading may have it: without tabs, line breaks and blanks
    at the ends, ``\\`` as ``/``, split into its parts as written, its scheme in lower
    case, its authority as ``authority`` reads it, its path decoded and without ``.``,
    ``..`` or repeated slashes, its query decoded, its fragment and an empty query
    dropped."""
    return forms(uri).read[0]


def authority(scheme: str, written: str) -> str:
    """The ``//``-led authority of a URI of ``scheme`` (in lower case) as a server
    reads it: a host that is case-blind as ``_host_and_port`` reads it, a ``file``
    URI's ``localhost`` as no host."""
    if scheme not in CASE_BLIND_HOSTS:
        return written
    if not written.startswith("//"):
        return written.lower()
    read = "//" + _host_and_port(scheme, written[2:])
    return "//" if scheme == "file" and read == "//localhost" else read


def _host_and_port(scheme: str, written: str) -> str:
    """The host and port of a case-blind ``scheme``'s authority as a URL parser takes
    them to name a server: without a name and password before the last ``@``, in the
    letters IDNA maps it to (NFKC, then lower case, a name outside ASCII in its
    ``xn--`` form), without dots at its end, and without a port that is the scheme's
    own (``:80`` for ``http``) or empty."""
    named = written.rpartition("@")[2]
    end = named.find("]") + 1 if named.startswith("[") else 0
    colon = named.find(":", end)
    name, port = (named, "") if colon < 0 else (named[:colon], named[colon + 1 :])
    name = _host_name(name)
    if port.isascii() and port.isdigit():
        number = int(port)
        port = "" if number == _DEFAULT_PORTS.get(scheme) else str(number)
    return name + (":" + port if port else "")


def _host_name(written: str) -> str:
    """A host name as a WHATWG URL parser (Node's, a browser's) reads it: NFKC, lower
    case, without dots at its end, a label outside ASCII in its ``xn--`` form (``ß``
    and ``ς`` kept as they are, as that parser keeps them), and an IPv4 address in any
    of its spellings (``127.1``, ``0x7f.1``, ``2130706433``) as its four numbers. A
    name past what a host name may be (253 characters, a label past 63) names no host:
    it is read as written, in lower case, at a cost bounded by its length."""
    if len(written) > _HOST_MAX or any(len(label) > _LABEL_MAX for label in written.split(".")):
        return written.lower()
    name = unicodedata.normalize("NFKC", written.translate(_IDNA_MAPPED)).lower()
    name = name.rstrip(".") or name
    if not name.isascii():
        with contextlib.suppress(UnicodeError):
            name = ".".join(
                label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii")
                for label in name.split(".")
            )
    return _ipv4(name) or name


def _ipv4(name: str) -> str | None:
    """``name`` as the four numbers of an IPv4 address when a URL parser takes it for
    one (its last label a number: decimal, ``0x`` hex or ``0``-led octal, the parts
    before it one byte each), else None."""
    labels = name.split(".")
    if not 1 <= len(labels) <= 4:
        return None
    numbers: list[int] = []
    for label in labels:
        number = _number(label)
        if number is None:
            return None
        numbers.append(number)
    *first, last = numbers
    if any(n > 255 for n in first) or last >= 256 ** (5 - len(labels)):
        return None
    value = sum(n << 8 * (3 - i) for i, n in enumerate(first)) + last
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def _number(label: str) -> int | None:
    digits, base = label, 10
    if label[:2] in ("0x", "0X"):
        digits, base = label[2:] or "0", 16
    elif len(label) > 1 and label.startswith("0"):
        digits, base = label[1:], 8
    if not digits.isascii() or not digits.isalnum():
        return None
    try:
        return int(digits, base)
    except ValueError:
        return None


def _reading(text: str, decode: Callable[[str], str]) -> tuple[str, str]:
    """``text`` (its tabs, line breaks, blanks at the ends and backslashes dealt
    with) as read, with its query and without, each part decoded by ``decode``."""
    parts = _PARTS.fullmatch(text)
    if parts is None:
        plain = _path(decode(text))
        return plain, plain
    scheme, written_authority, path, query, _fragment = parts.groups()
    scheme = scheme.lower()
    if written_authority is None and scheme == "file":
        # A file URL without an authority names a path from the root.
        written_authority, path = "//", "/" + path.lstrip("/")
    bare = scheme + ":" + authority(scheme, decode(written_authority or "")) + _path(decode(path))
    return bare + (decode(query) if query and query != "?" else ""), bare


def _cleaned(uri: str) -> str:
    """``uri`` without tabs, line breaks and blanks at the ends, ``\\`` as ``/``."""
    return uri.translate(_DROPPED).strip(_BLANKS).replace("\\", "/")


def _as_is(text: str) -> str:
    return text


def _path(decoded: str) -> str:
    return _without_dots(_SLASHES.sub("/", decoded.replace("\\", "/")))


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
