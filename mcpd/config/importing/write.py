"""What ``mcpd import`` writes: the servers as mcpd TOML, and the secrets apart.

A secret found in the other host's file (a token in ``env``, a key in a header, one
written inside an argument or a URL) never goes into the TOML. Printed, it becomes a
variable the user gives mcpd; written with ``-o FILE``, it goes into a file of its own
under ``FILE``'s secrets directory (mode 0600, the directory 0700), and the TOML refers
to it with ``${file:PATH}``: the written config works as it is, with ``check-config``
and ``serve``, and the secret is readable by its owner alone (until mcpd puts one from
an argument back on the server's command line: see ``exposure``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

from protocol.jsonrpc import messages as rpc
from protocol.shown.visible import hidden, visible

from ...local.state.privatefile import make_private_directory, write_atomically
from .convert import Imported
from .inline import table_args, table_text
from .secret import SCHEME

_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+\Z")  # not $: it matches before a final \n


def to_toml(imported: Imported, moved: dict[tuple[str, ...], Path] | None = None) -> str:
    """The servers as mcpd config text; secrets appear as references only: to the file
    each was moved to (``moved``), else to a variable named for it."""
    moved = moved or {}
    out = [
        f"# MCP servers imported from {_line(imported.source)} by `mcpd import`.",
        "# Review them, then add [daemon] or [naming] settings if the defaults do not fit.",
    ]
    if moved:
        out += [
            "#",
            "# Secrets were not copied here: each is in a file of its own (mode 0600):",
        ]
        out += [f"#   {_line(str(path))}  ({_line('.'.join(key))})" for key, path in moved.items()]
    elif imported.secrets or imported.inline:
        out += [
            "#",
            "# Secrets were not copied. Give mcpd these variables (systemd: Environment= or",
            "# EnvironmentFile=), or replace a reference with ${file:PATH} (LoadCredential=):",
        ]
        out += [
            f"#   {var}  ({_line('.'.join(path))})"
            for path in imported.secrets
            for var in _variables(imported, path)
        ]
        out += [f"#   {i.var}  ({'.'.join(i.where)})" for i in imported.inline]
    if imported.exposed:
        out += ["#", "# Warnings:"] + [f"#   {_line(w)}" for w in imported.exposed]
    if imported.notes:
        out += ["#", "# Notes:"] + [f"#   {_line(n)}" for n in imported.notes]
    for alias, table in imported.servers.items():
        table = _with_references(imported, alias, table, moved)
        out += ["", f"[servers.{_key(alias)}]"]
        for key in ("command", "args", "cwd", "inherit_env", "url", "transport", "enabled",
                    "call_timeout", "trusted"):  # fmt: skip
            if key in table:
                out.append(f"{key} = {_toml_value(table[key])}")
        for sub in ("env", "headers", "auth", "tools"):
            items = table.get(sub)
            if not isinstance(items, dict) or not items:
                continue
            out.append(f"[servers.{_key(alias)}.{sub}]")
            for key, value in items.items():
                where = ("servers", alias, sub, key)
                if where in imported.secrets:
                    value = _referenced(imported, where, str(value), moved)
                out.append(f"{_key(key)} = {_toml_value(value)}")
    return "\n".join(out) + "\n"


def _pieces(value: str) -> tuple[str, list[tuple[bool, str]]]:
    """A secret value (in mcpd's syntax) as its auth scheme word, and the rest as pieces:
    (True, literal text, unescaped) or (False, a reference as it is written)."""
    scheme = SCHEME.match(value)
    head = scheme.group(0) if scheme else ""
    pieces: list[tuple[bool, str]] = []
    for part in _REFERENCE.split(value[len(head) :]):
        if not part:
            continue
        if part.startswith("${"):
            pieces.append((False, part))
        elif pieces and pieces[-1][0]:
            pieces[-1] = (True, pieces[-1][1] + part.replace("$$", "$"))
        else:
            pieces.append((True, part.replace("$$", "$")))
    return head, pieces


_REFERENCE: Final = re.compile(r"(\$\{[^}]*\})")


def _variables(imported: Imported, where: tuple[str, ...]) -> list[str]:
    """The variables that carry a printed secret: one for each stretch of its literal
    text, as the references written between them stay where they are."""
    _, pieces = _pieces(_secret_at(imported, where))
    var = imported.secrets[where]
    count = sum(literal for literal, _ in pieces)
    return [var] + [f"{var}_{n}" for n in range(2, count + 1)]


def _secret_at(imported: Imported, where: tuple[str, ...]) -> str:
    """The value of the secret at ``where`` (``servers``, alias, table, key)."""
    _, alias, sub, key = where
    table = imported.servers[alias].get(sub)
    return str(table.get(key)) if isinstance(table, dict) else ""


def _moved_key(where: tuple[str, ...], n: int) -> tuple[str, ...]:
    return where if n == 1 else (*where, str(n))


def _referenced(
    imported: Imported, where: tuple[str, ...], value: str, moved: dict[tuple[str, ...], Path]
) -> str:
    """A secret value as the TOML holds it: each literal stretch a reference to its
    file or its variable, the value's own references as they were."""
    head, pieces = _pieces(value)
    variables = iter(_variables(imported, where))
    out, n = [head], 0
    for literal, text in pieces:
        if not literal:
            out.append(text)
            continue
        n += 1
        var = next(variables)
        key = _moved_key(where, n)
        out.append(f"${{file:{moved[key]}}}" if key in moved else f"${{{var}}}")
    return "".join(out)


def _with_references(
    imported: Imported, alias: str, table: rpc.JsonObject, moved: dict[tuple[str, ...], Path]
) -> rpc.JsonObject:
    """``table`` with each secret inside an argument or the URL replaced by a reference."""
    mine = [i for i in imported.inline if i.alias == alias]
    if not mine:
        return table
    out, args = dict(table), table_args(table)
    for i in sorted(mine, key=lambda i: i.start, reverse=True):  # later ones first
        ref = f"${{file:{moved[i.where]}}}" if i.where in moved else f"${{{i.var}}}"
        value = table_text(out, "url") if i.index is None else args[i.index]
        if i.index is None:
            out["url"] = value[: i.start] + ref + value[i.end :]
        else:
            args[i.index] = value[: i.start] + ref + value[i.end :]
    if "args" in out:
        out["args"] = [*args]
    return out


def _line(text: str) -> str:
    """``text`` as one comment line: the host file's names and values in it show their
    line breaks, control and hidden characters as escapes (TOML allows none in a
    comment)."""
    return visible(text)


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_value(key)


def _toml_value(value: rpc.Json) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    # A JSON string is a TOML basic string (JSON escapes C0 controls as TOML allows);
    # DEL, C1 controls and what draws nothing or reorders (bidi controls, zero-width
    # characters, tags) are escaped too, so that the person reviewing the file sees them.
    return _NOT_PLAIN.sub(_escaped, json.dumps(str(value), ensure_ascii=False))


_NOT_PLAIN: Final = re.compile(r"[^ -~]")


def _escaped(m: re.Match[str]) -> str:
    ch = m.group()
    if not hidden(ch):
        return ch
    return f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}"


def secrets_dir(toml_path: str | os.PathLike[str]) -> Path:
    """Where the secrets of a config written to ``toml_path`` go: beside it."""
    # As given, not where a link there points: the config written replaces the link.
    p = Path(os.path.abspath(toml_path))
    return p.with_name(p.stem + ".secrets")


def move_secrets(imported: Imported, directory: Path) -> dict[tuple[str, ...], Path]:
    """Write each secret to its own file under ``directory``; where each went."""
    if not imported.secrets and not imported.inline:
        return {}
    make_private_directory(directory)
    moved: dict[tuple[str, ...], Path] = {}
    names: set[str] = set()
    for where in imported.secrets:
        _, alias, sub, key = where
        # A secret file is read as it is: the "$" the TOML escaped is the secret's own.
        # The references in a secret are left in the TOML, to be expanded as ever; the
        # text between them goes to files.
        _, pieces = _pieces(_secret_at(imported, where))
        texts = [text for literal, text in pieces if literal]
        for n, secret in enumerate(texts, 1):
            name = _file_name(alias, sub, key if n == 1 else f"{key}.{n}")
            target = directory / _unique(name, names)
            write_atomically(target, (secret + "\n").encode("utf-8"))
            moved[_moved_key(where, n)] = target
    for i in imported.inline:
        secret = i.value_in(imported.servers[i.alias])[i.start : i.end].replace("$$", "$")
        # ("servers", alias, "args[3]"[, NAME]) -> "args", "3[.NAME]"
        key = ".".join([str(i.index), *i.where[3:]])
        place = ("url", i.where[-1]) if i.index is None else ("args", key)
        target = directory / _unique(_file_name(i.alias, *place), names)
        write_atomically(target, (secret + "\n").encode("utf-8"))
        moved[i.where] = target
    return moved


_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


def _file_name(alias: str, sub: str, key: str) -> str:
    return _UNSAFE.sub("_", f"{alias}.{sub}.{key}")


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or with a number after it when two keys make the same file name
    (``API_KEY`` and ``API KEY``): each secret keeps a file of its own."""
    found, n = name, 2
    while found in taken:
        found, n = f"{name}_{n}", n + 1
    taken.add(found)
    return found
