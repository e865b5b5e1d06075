"""Secrets where others can read them: in a stdio server's arguments, in a URL.

Every local user can read a process's command line (``ps``, ``/proc/PID/cmdline``), so
a key passed as an argument is not the server's alone, whether it is written in the
config or comes from ``${VAR}`` or ``${file:PATH}``: mcpd expands those into the
argument. A URL ends up in logs: proxies', the server's own, mcpd's error messages.
Neither can be moved for the user: whether a program also reads its key from an
environment variable, or a server takes it in a header, is theirs to say. So mcpd
points at each one, without showing it, and says what to do instead.

The rules are few, so that what they flag deserves a look:

- the value of an option or assignment whose name says it is a secret (``--api-key
  VALUE``, ``--token=VALUE``, ``API_KEY=VALUE``, ``?access_token=VALUE``), unless the
  name also says the value is something else: where the secret is (a file, a path, a
  variable's name) or a number about it (a limit, a size, a lifetime);
- a value in the format of a well-known kind of token (GitHub, GitLab, OpenAI and
  Anthropic, Slack, AWS, Google, Stripe, JSON Web Tokens), wherever it stands;
- a password in a URL's user info (``https://user:PASSWORD@host``,
  ``postgres://user:PASSWORD@host/db``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Final

import msgspec

_SECRET_WORDS: Final = frozenset(
    {"token", "secret", "password", "passwd", "passphrase", "apikey", "accesskey"}
)
_SECRET_PAIRS: Final = frozenset({("api", "key"), ("access", "key")})
# A query parameter named only this is a key too (Google's ?key=, Azure's ?sig=).
_SECRET_QUERY: Final = frozenset({"key", "sig"})
# Words that say the value is about a secret, not the secret: --token-file PATH,
# --api-key-env NAME, --max-tokens N, --token-ttl 3600.
_NOT_THE_SECRET: Final = frozenset(
    {
        "file", "path", "dir", "env", "var", "name", "id", "url", "uri", "endpoint",
        "type", "kind", "mode", "header", "command", "cmd", "helper", "prompt", "stdin",
        "location", "store", "limit", "max", "min", "count", "size", "length", "budget",
        "ttl", "expiry", "expires", "lifetime", "timeout",
    }
)  # fmt: skip

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_OPTION_VALUE: Final = re.compile(r"--?([A-Za-z][A-Za-z0-9_.-]*)=(.*)", re.S)
_ASSIGNMENT: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_OPTION: Final = re.compile(r"--?([A-Za-z][A-Za-z0-9_.-]*)")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_REFERENCES_ONLY: Final = re.compile(r"(?:\$\{[^}]*\})+")
# (what it is, the pattern; group 1 is the fixed prefix of the format, safe to show)
_FORMATS: Final = [
    ("a GitHub token", re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{30,}")),
    ("a GitHub token", re.compile(r"\b(github_pat_)[A-Za-z0-9_]{30,}")),
    ("a GitLab token", re.compile(r"\b(glpat-)[A-Za-z0-9_-]{20,}")),
    ("an OpenAI or Anthropic key", re.compile(r"\b(sk-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}")),
    ("an AWS access key", re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("a Google API key", re.compile(r"\b(AIza)[A-Za-z0-9_-]{35}")),
    ("a Stripe key", re.compile(r"\b([rs]k_(?:live|test)_)[A-Za-z0-9]{16,}")),
    ("a JSON Web Token", re.compile(r"\b(eyJ)[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*", re.A)),
]  # fmt: skip


class Exposed(msgspec.Struct, frozen=True):
    """One secret in an argument or a URL."""

    index: int | None  # the argument that holds it; None: the URL
    start: int  # where it is in that string
    end: int
    what: str  # for people: "the value of --api-key", "a GitHub token"
    name: str  # for a variable that could carry it: "api_key", "token", "password"
    prefix: str = ""  # the start of a token's format, which shows its kind and no secret


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]


def secret_name(name: str, *, query: bool = False) -> bool:
    words = _words(name)
    if not words or _NOT_THE_SECRET.intersection(words):
        return False
    if query and words[0] in _SECRET_QUERY and len(words) == 1:
        return True
    return bool(_SECRET_WORDS.intersection(words)) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


def in_args(args: Sequence[str]) -> list[Exposed]:
    found: dict[int, Exposed] = {}
    for i, arg in enumerate(args):
        if i in found:
            continue
        m = _OPTION_VALUE.fullmatch(arg) or _ASSIGNMENT.fullmatch(arg)
        if m is not None and m.group(2) and secret_name(m.group(1)):
            what = f"the value of {arg.partition('=')[0]}"
            found[i] = Exposed(i, m.start(2), len(arg), what, _snake(m.group(1)))
            continue
        m = _OPTION.fullmatch(arg)
        if m is not None and secret_name(m.group(1)) and i + 1 < len(args):
            value = args[i + 1]
            if value and not value.startswith("-"):
                name = _snake(m.group(1))
                found[i + 1] = Exposed(i + 1, 0, len(value), f"the value of {arg}", name)
                continue
        scheme = _SCHEME.search(arg)
        inside = in_url(arg[scheme.start() :], scheme.start()) if scheme else []
        if not inside:
            inside = _tokens(arg, 0)
        if inside:
            first = inside[0]
            found[i] = msgspec.structs.replace(first, index=i)
    return [found[i] for i in sorted(found)]


def in_url(url: str, offset: int = 0) -> list[Exposed]:
    """What ``url`` gives away; positions count from ``offset``."""
    found: list[Exposed] = []
    m = _SCHEME.match(url)
    if m is not None:
        host_end = len(url)
        for c in "/?#":
            at = url.find(c, m.end())
            if at >= 0:
                host_end = min(host_end, at)
        at = url.rfind("@", m.end(), host_end)
        colon = url.find(":", m.end(), at) if at >= 0 else -1
        if colon >= 0 and colon + 1 < at:
            found.append(
                Exposed(
                    None, offset + colon + 1, offset + at, "the password in the URL", "password"
                )
            )
        found += _query(url, host_end, offset)
    taken = [(f.start, f.end) for f in found]
    found += [
        t for t in _tokens(url, offset) if not any(s < t.end and t.start < e for s, e in taken)
    ]
    return sorted(found, key=lambda f: f.start)


def masked(value: str, found: Sequence[Exposed]) -> str:
    """``value`` with each secret in ``found`` replaced by ``***`` (after its format's
    prefix); a secret given as ``${...}`` references shows them, which reveal nothing."""
    for f in sorted(found, key=lambda f: f.start, reverse=True):
        secret = value[f.start : f.end]
        shown = secret if _REFERENCES_ONLY.fullmatch(secret) else f"{f.prefix}***"
        value = value[: f.start] + shown + value[f.end :]
    return value


def masked_args(args: Sequence[str]) -> list[str]:
    found = in_args(args)
    return [masked(a, [f for f in found if f.index == i]) for i, a in enumerate(args)]


def warnings(alias: str, args: Sequence[str], url: str | None) -> list[str]:
    """One line per secret in a server's arguments or URL, each naming where it is."""
    out = []
    for f in in_args(args):
        assert f.index is not None
        arg = args[f.index]
        # NAME=VALUE is how `docker run -e` and `env` set a variable; both also pass on
        # one given as NAME alone from their own environment.
        alone = f" and pass {arg.partition('=')[0]} alone" if _ASSIGNMENT.fullmatch(arg) else ""
        out.append(
            f'servers.{alias}.args[{f.index}]: {f.what} ("{masked(arg, [f])}") is on the '
            "server's command line, which every local user can read (ps, /proc/PID/cmdline); "
            "if the program can take it from an environment variable, set that in "
            f"[servers.{alias}.env]{alone} instead"
        )
    for f in in_url(url or ""):
        assert url is not None
        where = "an Authorization header" if f.name == "password" else "a header"
        out.append(
            f'servers.{alias}.url: {f.what} ("{masked(url, [f])}") can end up in logs '
            "(proxies', the server's, mcpd's own error messages); if the server accepts it "
            f"in {where}, move it to [servers.{alias}.headers]"
        )
    return out


def _query(url: str, host_end: int, offset: int) -> list[Exposed]:
    q = url.find("?", host_end)
    if q < 0:
        return []
    end = url.find("#", q)
    end = len(url) if end < 0 else end
    found = []
    start = q + 1
    for part in url[start:end].split("&"):
        name, eq, value = part.partition("=")
        if eq and value and secret_name(name, query=True):
            at = start + len(name) + 1
            found.append(
                Exposed(None, offset + at, offset + at + len(value), f"the query parameter {name}",
                        _snake(name))
            )  # fmt: skip
        start += len(part) + 1
    return found


def _tokens(text: str, offset: int) -> list[Exposed]:
    found = []
    for what, pattern in _FORMATS:
        m = pattern.search(text)
        if m is not None:
            found.append(Exposed(None, offset + m.start(), offset + m.end(), what, "token",
                                 m.group(1)))  # fmt: skip
    return sorted(found, key=lambda f: f.start)


def _snake(name: str) -> str:
    return "_".join(_words(name)) or "secret"
