"""What tomllib says of a file it cannot read, said with the line it names and, for the
mistakes a person makes most, what to write instead: a string left unquoted, a
``True`` written as Python writes it, a table declared twice (named as the file writes
it, ``[servers.notes]``), a key set twice."""

from __future__ import annotations

import ast
import json
import re
from typing import Final

from protocol.visible import visible

from ..credentials.exposure import secret_setting

__all__ = ["syntax_error"]

# Where tomllib's message says the file went wrong, and a line that starts a table.
_AT_LINE_RE: Final = re.compile(r"\(at line ([0-9]+), column ([0-9]+)\)\Z")
_HEADER_RE: Final = re.compile(r"\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?\Z")
_DECLARED_RE: Final = re.compile(r"Cannot declare (\(.*\)) twice")
_BARE_KEY_RE: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
# The start of a value TOML has: a string, an array, an inline table, a number, a date.
_VALUE_START: Final = tuple("\"'[{+-0123456789")
# What the line of an error is cut to: the start of it shows which line it is.
_SHOWN: Final = 120


def syntax_error(text: str, error: str) -> str:
    """``error``, tomllib's of ``text``, with the text of the line it names and what to
    write instead where that is known."""
    at = _AT_LINE_RE.search(error)
    lines = text.splitlines()
    declared = _DECLARED_RE.match(error)
    if declared is not None:  # the table as a tuple of its keys: as the file names it
        table = ".".join(_written(k) for k in ast.literal_eval(declared[1]))
        error = f"Cannot declare [{table}] twice{error[declared.end() :]}"
        return f"{error}; write each table once, with all its keys under it"
    if at is None or int(at[1]) > len(lines):
        return error
    line = lines[int(at[1]) - 1]
    if error.startswith("Cannot overwrite"):
        return error + _set_again(lines, int(at[1]))
    said = f"{error}: {_shown(line, int(at[2]) - 1)}"
    if error.startswith("Invalid value"):
        hint = _value_hint(line, int(at[2]) - 1)
        if hint:
            said += f"; {hint}"
    return said


def _written(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else json.dumps(key, ensure_ascii=False)


def _setting(line: str, column: int) -> tuple[str, str]:
    """The key whose value starts at ``column`` (the last of a dotted key, or the one
    in an inline table), and that value as written, up to a comment or the end of the
    inline table or array it is in."""
    before = line[:column].rstrip().removesuffix("=").rstrip()
    name = re.search(r"[\w-]*[\"']?\Z", before)
    value = line[column:].split(" #", 1)[0]
    if "{" in before or "[" in before:
        value = re.split(r"[,}\]]", value, maxsplit=1)[0]
    return (name[0] if name else "").strip("\"'"), value.strip()


def _shown(line: str, column: int) -> str:
    """The line as an error shows it: a secret's value left out, cut to a length a
    terminal line holds, what would act on a terminal escaped."""
    name, value = _setting(line, column)
    key, equals, rest = line.partition("=")
    first = key.strip().rsplit(".", 1)[-1].strip("\"' ")
    if equals and secret_setting(first, rest.strip().strip("\"'")):
        line = key + "= ***"  # the line's own key holds a secret, whatever is wrong
    elif secret_setting(name, value) or secret_setting(name, line[column:]):
        line = line[:column] + "***"
    line = line.strip()
    return visible(line if len(line) <= _SHOWN else line[:_SHOWN] + "...")


def _value_hint(line: str, column: int) -> str | None:
    """What a value TOML could not read, starting at ``column``, most likely lacks."""
    name, value = _setting(line, column)
    if not value:
        return "the key has no value"
    if value in ("True", "False"):
        return f"true and false are written in lower case: {value.lower()}"
    if value.startswith(_VALUE_START):
        return None
    if secret_setting(name, value) or not name:
        return "strings need quotes"
    return f"strings need quotes: {name} = {visible(json.dumps(value, ensure_ascii=False))}"


def _set_again(lines: list[str], number: int) -> str:
    """For tomllib's "Cannot overwrite a value", which names a line but not the key: the
    key that line sets, in the table it is in (its dotted path as written)."""
    line = lines[number - 1]
    header = _HEADER_RE.match(line)
    if header is not None:
        return f": {header[1]} is set twice"
    if "=" not in line:
        return ""
    key = line.split("=", 1)[0].strip()
    above = (_HEADER_RE.match(before) for before in reversed(lines[: number - 1]))
    table = next((h[1] for h in above if h is not None), None)
    return f": {table + '.' if table else ''}{key} is set twice"
