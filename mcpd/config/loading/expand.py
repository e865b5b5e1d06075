"""``${...}`` in the config's strings: ``${VAR}`` and ``${VAR:-default}`` from the
environment, ``${file:PATH}`` from a secret file, ``$$`` for a literal ``$``.

A reference that is badly written is a mistake in the file, wherever it is, and so is
one to a file larger than any secret (the wrong path), or to a variable as large. One
that is well written but cannot be resolved here (a variable not set, a file that
cannot be read) is a fact about this machine: inside a server's table it keeps that
server from starting and nothing else, and a disabled server's table is not expanded
at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import msgspec

from ..credentials.exposure import secret_name
from ..credentials.secrets import (
    SECRET_FILE_LIMIT,
    HeldSecret,
    SecretError,
    SecretTooLarge,
    read_secret,
)
from ..tables.model import ConfigError

_VAR_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A name an error may write: one as variables are written. Any other text between
# ``${`` and ``}`` may be a secret put there by mistake.
_SHOWN_NAME_RE: Final = re.compile(r"[A-Z_][A-Z0-9_]{0,63}\Z")
# The last branch is a "${" that no "}" closes.
_VAR_RE: Final = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_UNCLOSED: Final = "${"
# Variables that say where things are or how the session looks, not secrets: their
# values (a home directory, a path) would be masked wherever they appear.
_PLAIN_VARS: Final = frozenset(
    {"HOME", "USER", "LOGNAME", "PATH", "PWD", "SHELL", "LANG", "TERM", "TMPDIR", "TZ"}
)
_PLAIN_PREFIXES: Final = ("XDG_", "LC_")
_PLAIN_SUFFIXES: Final = ("_DIRECTORY",)  # systemd's STATE_DIRECTORY= and the others
# Shorter values are not told apart from ordinary text ("true", a port).
MIN_SECRET: Final = 6
# A variable's value is held as a secret file's is, and searched for in all servers
# send the same way: one larger than a secret file may be is the wrong variable.
VALUE_LIMIT: Final = SECRET_FILE_LIMIT

FoundSecrets = list[HeldSecret]


class Unresolved(ConfigError):
    """A well-formed reference with nothing to resolve it to on this machine."""


class References:
    """The variables and secret files a part of the config refers to, whether or not
    they could be resolved: who may see what (``Config.withheld_from``) and what a
    sandbox hides follow from them."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.files: set[str] = set()
        # The key path each secret file is named at: an error about the value it gave
        # says the file, which the key's text no error shows.
        self.read_from: dict[str, str] = {}

    def note(self, body: str, path: str) -> None:
        if body.startswith("file:"):
            self.files.add(body[len("file:") :])
            self.read_from.setdefault(path, body[len("file:") :])
        else:
            self.names.add(body.partition(":-")[0])


def _unclosed(path: str) -> ConfigError:
    return ConfigError(path, 'bad variable reference: a "${" that no "}" closes ($$ is a "$")')


def _check_reference(body: str, path: str) -> None:
    if body.startswith("file:"):
        if not body[len("file:") :]:
            raise ConfigError(path, "${file:...} needs a path")
        return
    name = body.partition(":-")[0]
    if not _VAR_NAME_RE.match(name):
        raise ConfigError(
            path, "bad variable reference: a reference that is not a variable name (${NAME})"
        )


def _plain_var(name: str) -> bool:
    return name in _PLAIN_VARS or name.startswith(_PLAIN_PREFIXES) or name.endswith(_PLAIN_SUFFIXES)


def _secret_value(name: str, path: str) -> bool:
    """Whether a variable's value is a secret where it is used: its name or its key's
    says so (``API_TOKEN``), or it is a header or part of an ``auth`` table. Any other
    value (a folder, a socket, a port) is masked nowhere: masking it would blot out
    every path under it in what servers send and what mcpd logs."""
    if _plain_var(name):
        return False
    key = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return secret_name(name) or secret_name(key) or ".headers." in path or ".auth." in f"{path}."


def expand(
    value: str,
    path: str,
    env: Mapping[str, str],
    refs: References | None = None,
    found: FoundSecrets | None = None,
) -> str:
    """``refs`` notes each reference; ``found`` collects the values that came from the
    environment or a secret file (a default written in the file is no secret)."""

    def held(value: str, plain: bool = False) -> str:
        if found is not None and not plain and len(value) >= MIN_SECRET:
            found.append(HeldSecret(path, value))
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        if m.group(0) == _UNCLOSED:
            raise _unclosed(path)
        body = m.group(1)
        _check_reference(body, path)
        if refs is not None:
            refs.note(body, path)
        if body.startswith("file:"):
            try:
                return held(read_secret(body[len("file:") :], env))
            except SecretTooLarge as exc:
                raise ConfigError(path, str(exc)) from None
            except SecretError as exc:
                raise Unresolved(path, str(exc)) from None
        name, sep, default = body.partition(":-")
        value = env.get(name)
        if value is not None and (value or not sep):
            _check_size(name, value, path)
            return held(value, not _secret_value(name, path))
        if sep:  # as in the shell, ":-" also replaces a variable set to ""
            return default
        if _SHOWN_NAME_RE.match(name):
            raise Unresolved(
                path, f"environment variable {name} is not set (use ${{{name}:-default}})"
            )
        raise Unresolved(path, "an environment variable whose name is not upper case is not set")

    return _VAR_RE.sub(sub, value)


def _check_size(name: str, value: str, path: str) -> None:
    size = len(value.encode("utf-8", "surrogateescape"))
    if size > VALUE_LIMIT:
        who = (
            f"environment variable {name}"
            if _SHOWN_NAME_RE.match(name)
            else "an environment variable whose name is not upper case"
        )
        raise ConfigError(
            path,
            f"{who} holds {size} bytes, more than a value from the environment may "
            f"({VALUE_LIMIT} bytes): is it the right variable?",
        )


def stand_ins(
    names: Iterable[str], env: Mapping[str, str], found: Iterable[HeldSecret]
) -> dict[str, str]:
    """What the config's errors write for each value a reference gave: the reference
    (``${TPASS}``), or, for a secret file's, where it is held. Whoever reads the
    config's state reads its errors too, and any value may be a password: one spliced
    into a URL is checked, and quoted, as the URL's (``protocol.shown.stand_ins``)."""
    shown = {h.value: f"[secret of {h.where}]" for h in found}
    for name in names:
        value = env.get(name)
        if value is not None and len(value) >= MIN_SECRET and not _plain_var(name):
            shown[value] = f"${{{name}}}"
    return shown


def _walk(node: Any, path: str, on_str: Callable[[str, str], str]) -> Any:
    if isinstance(node, str):
        return on_str(node, path)
    if isinstance(node, dict):
        return {k: _walk(v, f"{path}.{k}" if path else k, on_str) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, f"{path}[{i}]", on_str) for i, v in enumerate(node)]
    return node


def expand_tree(
    node: object,
    path: str,
    env: Mapping[str, str],
    refs: References | None = None,
    found: FoundSecrets | None = None,
) -> object:
    """Every string under ``node`` expanded; any reference that fails is an error."""
    return _walk(node, path, lambda value, where: expand(value, where, env, refs, found))


class ServerTable(msgspec.Struct, frozen=True):
    """One ``[servers.X]`` table, expanded as far as it can be."""

    body: Any  # the table as TOML gave it (a dict unless the file is wrong), strings expanded
    # Why the server cannot start: the first reference that could not be resolved.
    unresolved: str | None = None
    # The key paths whose strings were left as written, so nothing is known of their
    # values yet (validation of them waits until they are expanded).
    unknown: frozenset[str] = frozenset()
    variables: frozenset[str] = frozenset()  # the variables it refers to
    files: frozenset[str] = frozenset()  # the secret files it refers to
    read_from: dict[str, str] = {}  # the key path -> the secret file named there


def expand_server(
    body: object, where: str, env: Mapping[str, str], found: FoundSecrets | None = None
) -> ServerTable:
    refs = References()
    if isinstance(body, dict) and body.get("enabled") is False:
        return _unexpanded(body, where, refs)
    problems: list[Unresolved] = []
    unknown: set[str] = set()

    def on_str(value: str, path: str) -> str:
        try:
            return expand(value, path, env, refs, found)
        except Unresolved as exc:
            problems.append(exc)
            unknown.add(path)
            return value

    expanded = _walk(body, where, on_str)
    problem = str(problems[0]) if problems else None
    return ServerTable(
        expanded,
        problem,
        frozenset(unknown),
        frozenset(refs.names),
        frozenset(refs.files),
        refs.read_from,
    )


def _unexpanded(body: dict[str, Any], where: str, refs: References) -> ServerTable:
    """A disabled server: its variables and files may be missing, but a reference
    written wrongly is still an error in the file."""
    unknown: set[str] = set()

    def on_str(value: str, path: str) -> str:
        for m in _VAR_RE.finditer(value):
            if m.group(0) == _UNCLOSED:
                raise _unclosed(path)
            if m.group(1) is not None:
                _check_reference(m.group(1), path)
                refs.note(m.group(1), path)
                unknown.add(path)
        return value

    _walk(body, where, on_str)
    return ServerTable(
        body, None, frozenset(unknown), frozenset(refs.names), frozenset(refs.files), refs.read_from
    )
