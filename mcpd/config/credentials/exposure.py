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
  variable's name), a number about it (a limit, a size, a lifetime), or a switch
  (``--no-auth``, ``--require-password``). Some words name a secret only as a name's
  last word (``--pass``, ``--db-pwd``, ``--basic-auth``, ``--bearer``,
  ``--credentials``): before another one they say something about it
  (``--pass-through``, ``--auth-server``), and ``PWD`` alone is the working directory.
  A value that is a URL, a path (for those last words), or a word naming a mode
  (``none``, ``oauth``, ``basic``, ``true``) is not taken for a secret;
- a header's value written in an argument (``Authorization: Bearer ...`` anywhere,
  ``X-Api-Key: ...`` at the start of an argument or after ``=``), and the credential
  after ``Bearer`` wherever it stands;
- the password a database client takes as a short option: ``-pSECRET`` after
  ``mysql`` or ``mariadb`` (``-p 3306`` and ``-p3306`` look like a port and are left
  alone), ``-p SECRET`` after ``mongo``/``mongosh``, ``-a SECRET`` after ``redis-cli``,
  ``-P SECRET`` after ``sqlcmd``;
- a value in the format of a well-known kind of token (GitHub, GitLab, OpenAI and
  Anthropic, Slack, AWS, Google, Stripe, JSON Web Tokens), wherever it stands;
- a password in a URL's user info (``https://user:PASSWORD@host``,
  ``postgres://user:PASSWORD@host/db``).

A variable's or a header's value (``secret_setting``) is judged by the same rules,
with a few more names that say a secret there (``Authorization``, ``Cookie``,
``SESSION``, ``PAT``, ``PRIVATE_KEY``, a last word ending in ``KEY``, ``PASS`` or
``PWD``, ``PGPASSWORD``), and is a secret too when its text holds one of those above.

Every secret in an argument or a URL is found, not only its first, and a string is
never shown with any of them in it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Final

import msgspec

from protocol.shown.server_urls import display_url

_SECRET_WORDS: Final = frozenset(
    {"token", "secret", "password", "passwd", "passphrase", "apikey", "accesskey"}
)
# A secret's name as a name's last word only: before another word they say something
# about it (--pass-through, --auth-server, --credentials-path).
_SECRET_LAST: Final = frozenset({"pass", "pwd", "auth", "bearer", "credential", "credentials"})
_SECRET_PAIRS: Final = frozenset({("api", "key"), ("access", "key")})
# A variable's or a header's name only: an option named so is often something else
# (--session NAME, --key server.pem), a variable rarely is.
_SETTING_WORDS: Final = frozenset({"authorization", "cookie", "session", "pat", "credential"})
_SETTING_PAIRS: Final = frozenset({("private", "key"), ("client", "key")})
# Glued to a variable's name (PGPASSWORD, PGPASS, MYSQL_PWD), and not another word.
_GLUED: Final = re.compile(r".*(?:password|passwd)|.*(?<!by)(?<!com)(?<!sur)pass|.+pwd|.*key")
# A query parameter named only this is a key too (Google's ?key=, Azure's ?sig=).
_SECRET_QUERY: Final = frozenset({"key", "sig"})
# Words that say the value is about a secret, not the secret: --token-file PATH,
# --api-key-env NAME, --max-tokens N, --token-ttl 3600; or that the option is a
# switch: --no-auth, --require-password.
_NOT_THE_SECRET: Final = frozenset(
    {
        "file", "path", "dir", "env", "var", "name", "id", "url", "uri", "endpoint",
        "type", "kind", "mode", "header", "command", "cmd", "helper", "prompt", "stdin",
        "location", "store", "limit", "max", "min", "count", "size", "length", "budget",
        "ttl", "expiry", "expires", "lifetime", "timeout",
        "no", "enable", "disable", "require", "skip", "use", "allow",
    }
)  # fmt: skip
# Values that name a mode or a switch's state: --auth none, --token=env.
_MODES: Final = frozenset(
    {
        "none", "true", "false", "yes", "no", "on", "off", "null", "auto", "default",
        "required", "optional", "oauth", "oauth2", "basic", "bearer", "token", "header",
        "env", "file", "stdin", "prompt", "keychain", "keyring",
    }
)  # fmt: skip

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_OPTION_VALUE: Final = re.compile(r"--?([A-Za-z][A-Za-z0-9_.-]*)=(.*)", re.S)
_ASSIGNMENT: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_OPTION: Final = re.compile(r"--?([A-Za-z][A-Za-z0-9_.-]*)")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Where a URL in a text begins, tried only where a run of a scheme's characters does and
# read without going back, so that a long word is read once and not once per letter.
_URL_START: Final = re.compile(r"(?<![A-Za-z0-9+.-])[0-9+.-]*+([A-Za-z][A-Za-z0-9+.-]*+)://")
_SPACE: Final = re.compile(r"\s")
_PATH: Final = re.compile(r"(?:~|\.\.?)?/")
_PORT: Final = re.compile(r"[0-9]+(?::[0-9]+)*")
_REFERENCES_ONLY: Final = re.compile(r"(?:\$\{[^}]*\})+")
# A header written out, at the start of an argument, after "=" or after a space.
_HEADER: Final = re.compile(r"(?<![^\s=])([A-Za-z][A-Za-z0-9_-]*)[ \t]*:([ \t]*)(?=\S)")
_ANYWHERE_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})
_AUTH_SCHEME: Final = re.compile(r"(?:bearer|basic|token|digest|bot)[ \t]+(?=\S)", re.I)
_BEARER: Final = re.compile(r"\bbearer[ \t]+((?:\$\{[^}]*\}|[A-Za-z0-9._~+/=-])+)", re.I)
_TOKEN_MARKS: Final = frozenset("0123456789._~+/=-$")
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

    def value_in(self, args: Sequence[str], url: str | None) -> str:
        """The secret itself, in the server's ``args`` or ``url``."""
        text = (url or "") if self.index is None else args[self.index]
        return text[self.start : self.end]


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]


def _name_kind(name: str, *, query: bool = False, setting: bool = False) -> str | None:
    """What ``name`` says of its value: that it is a secret ("secret"), that it is one
    by its last word, which a path may be instead (``--credentials ~/creds.json``:
    "last"), or nothing (None). A ``setting`` is a variable's or a header's name."""
    words = _words(name)
    if not words or _NOT_THE_SECRET.intersection(words):
        return None
    if query and words[0] in _SECRET_QUERY and len(words) == 1:
        return "secret"
    pairs = set(itertools.pairwise(words))
    if _SECRET_WORDS.intersection(words) or pairs & _SECRET_PAIRS:
        return "secret"
    if setting and (_SETTING_WORDS.intersection(words) or pairs & _SETTING_PAIRS):
        return "secret"
    if words[-1] in _SECRET_LAST and words != ["pwd"]:  # PWD alone: the working directory
        return "last"
    if setting and _GLUED.fullmatch(words[-1]) and words != ["pwd"]:
        return "last"
    return None


def secret_name(name: str) -> bool:
    """``name`` (a header's, a variable's) says its value is, or may be, a secret."""
    return _name_kind(name, setting=True) is not None


def secret_setting(name: str, value: str) -> bool:
    """A variable's or a header's ``value`` (its literal text) is a secret: by its
    name, as an option's value would be (see the module's rules), or by what it holds,
    as an argument would (a password in a URL, a token of a known format, a header or
    a bearer token written in it)."""
    return _secret_value(name, value, setting=True) or bool(_in_text(value))


def _secret_value(name: str, value: str, *, query: bool = False, setting: bool = False) -> bool:
    """``value``, given to ``name``, is a secret: see the module's rules."""
    kind = _name_kind(name, query=query, setting=setting)
    if kind is None or not value or value.lower() in _MODES or _SCHEME.match(value):
        return False
    return kind == "secret" or _PATH.match(value) is None


def _db_client(program: str) -> tuple[str, bool] | None:
    """The short option a database client takes a password with, and whether its value
    may be the next argument (mysql's may not: ``-p db`` asks for the password)."""
    base = program.rsplit("/", 1)[-1].lower()
    if any(w.startswith(("mysql", "mariadb")) for w in re.split(r"[^a-z0-9]+", base)):
        return "-p", False
    if base in ("mongo", "mongosh"):
        return "-p", True
    if base == "redis-cli":
        return "-a", True
    if base == "sqlcmd":
        return "-P", True
    return None


def in_args(args: Sequence[str], command: str | None = None) -> list[Exposed]:
    """Every secret in ``args`` of a server started as ``command``, in order."""
    found: list[list[Exposed]] = [[] for _ in args]
    client = _db_client(command) if command else None
    valued = -1  # the argument that is the value of the option before it
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        if i != valued:
            m = _OPTION_VALUE.fullmatch(arg) or _ASSIGNMENT.fullmatch(arg)
            if m is not None and _secret_value(m.group(1), m.group(2)):
                what = f"the value of {arg.partition('=')[0]}"
                found[i].append(Exposed(i, m.start(2), len(arg), what, _snake(m.group(1))))
            m = _OPTION.fullmatch(arg)
            if client is not None and arg.startswith(client[0]):
                flag, apart = client
                what = f"the password after {flag}"
                start = len(flag) + arg.startswith("=", len(flag))
                if start < len(arg) and not _PORT.fullmatch(arg, start):
                    found[i].append(Exposed(i, start, len(arg), what, "password"))
                elif arg == flag and apart and nxt is not None and not _PORT.fullmatch(nxt):
                    found[i + 1].append(Exposed(i + 1, 0, len(nxt), what, "password"))
                    valued = i + 1
            elif m is not None and nxt is not None and _secret_value(m.group(1), nxt):
                name = _snake(m.group(1))
                found[i + 1].append(Exposed(i + 1, 0, len(nxt), f"the value of {arg}", name))
                valued = i + 1
            elif not arg.startswith("-"):
                client = _db_client(arg) or client
        found[i] += [msgspec.structs.replace(f, index=i) for f in _in_text(arg)]
    return [f for here in found for f in _merged(here)]


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
    return _merged(found + _tokens(url, offset))


def masked_secrets(value: str, found: Sequence[Exposed]) -> str:
    """``value`` with each secret in ``found`` replaced by ``***`` (after its format's
    prefix); a secret given as ``${...}`` references shows them, which reveal nothing."""
    for f in sorted(found, key=lambda f: f.start, reverse=True):
        secret = value[f.start : f.end]
        shown = secret if _REFERENCES_ONLY.fullmatch(secret) else f"{f.prefix}***"
        value = value[: f.start] + shown + value[f.end :]
    return value


def masked_args(args: Sequence[str], command: str | None = None) -> list[str]:
    found = in_args(args, command)
    return [masked_secrets(a, [f for f in found if f.index == i]) for i, a in enumerate(args)]


def warnings(
    alias: str, args: Sequence[str], url: str | None, command: str | None = None
) -> list[str]:
    """One line per secret in a server's arguments or URL, each naming where it is and
    showing the string it is in with every secret of that string masked."""
    out = []
    found = in_args(args, command)
    for f in found:
        assert f.index is not None
        arg = args[f.index]
        shown = masked_secrets(arg, [g for g in found if g.index == f.index])
        # NAME=VALUE is how `docker run -e` and `env` set a variable; both also pass on
        # one given as NAME alone from their own environment.
        alone = f" and pass {arg.partition('=')[0]} alone" if _ASSIGNMENT.fullmatch(arg) else ""
        out.append(
            f'servers.{alias}.args[{f.index}]: {f.what} ("{shown}") is on the '
            "server's command line, which every local user can read (ps, /proc/PID/cmdline); "
            "if the program can take it from an environment variable, set that in "
            f"[servers.{alias}.env]{alone} instead"
        )
    found = in_url(url or "")
    for f in found:
        assert url is not None
        said = f'servers.{alias}.url: {f.what} ("{display_url(masked_secrets(url, found))}")'
        if f.name == "password":
            out.append(
                f"{said}: mcpd sends no credentials in a URL, and refuses the config while "
                "it has them; if the server accepts them in an Authorization header, put "
                f"that in [servers.{alias}.headers]"
            )
            continue
        out.append(
            f"{said} can end up in logs (proxies', the server's, mcpd's own error messages); "
            f"if the server accepts it in a header, move it to [servers.{alias}.headers]"
        )
    return out


def _in_text(text: str) -> list[Exposed]:
    """The secrets anywhere in an argument: in its URLs, in a known token format, in a
    header written in it, after ``Bearer``."""
    found = []
    # A URL ends at a space or where the next one begins: each part of the text is
    # read once, however many URLs it holds.
    starts = [m.start(1) for m in _URL_START.finditer(text)]
    for start, stop in itertools.pairwise([*starts, len(text)]):
        space = _SPACE.search(text, start, stop)
        found += in_url(text[start : space.start() if space else stop], start)
    return found + _tokens(text, 0) + _headers(text) + _bearers(text)


def _merged(found: list[Exposed]) -> list[Exposed]:
    """``found`` in order, each secret once: of two that overlap, the first found (the
    more telling) stays, stretched over both."""
    out: list[Exposed] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1].end:
            if f.end > out[-1].end:
                out[-1] = msgspec.structs.replace(out[-1], end=f.end)
            continue
        out.append(f)
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
        if eq and _secret_value(name, value, query=True):
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
        for m in pattern.finditer(text):
            found.append(Exposed(None, offset + m.start(), offset + m.end(), what, "token",
                                 m.group(1)))  # fmt: skip
    return sorted(found, key=lambda f: f.start)


def _headers(text: str) -> list[Exposed]:
    """A header's value, written as ``Name: value``: an Authorization (or Cookie)
    header's wherever it stands, another secret one's (``X-Api-Key: ...``) at the start
    of the text or after ``=``, and with a space after its colon (``token-server:1.2``
    is an image)."""
    found = []
    for m in _HEADER.finditer(text):
        name = m.group(1)
        anywhere = name.lower() in _ANYWHERE_HEADERS
        at_start = m.start() == 0 or text[m.start() - 1] == "="
        if not anywhere and not (at_start and m.group(2) and _name_kind(name) is not None):
            continue
        start = m.end()
        scheme = _AUTH_SCHEME.match(text, start)
        start = scheme.end() if scheme else start
        end = len(text.rstrip())
        if start < end:
            found.append(Exposed(None, start, end, f"the value of the {name} header", _snake(name)))
    return found


def _bearers(text: str) -> list[Exposed]:
    """The credential after ``Bearer``, when it looks like one (``Bearer abc.def.ghi``,
    ``Bearer ${TOKEN}``) and not like a word (``a Bearer token``)."""
    found = []
    for m in _BEARER.finditer(text):
        value = m.group(1)
        if len(value) >= 8 and _TOKEN_MARKS.intersection(value):
            found.append(Exposed(None, m.start(1), m.end(1), "a bearer token", "token"))
    return found


def _snake(name: str) -> str:
    return "_".join(_words(name)) or "secret"
