"""What tomllib says of a file it cannot read, with what to write instead for the
mistakes a person makes most. No text of the file is shown: a line may hold a secret,
and where a line starts inside an open array or string no scan of it can tell a key from
a value. Only tomllib's own message and position are said, and a hint chosen by the kind
of error; a table declared twice is named from the keys tomllib gives, which are those
of a real header."""

from __future__ import annotations

import ast
import json
import re
from typing import Final

_AT_LINE_RE: Final = re.compile(r"\(at line ([0-9]+), column ([0-9]+)\)\Z")
_DECLARED_RE: Final = re.compile(r"Cannot declare (\(.*\)) twice")
_BARE_KEY_RE: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
_PYTHON_BOOLEAN_RE: Final = re.compile(r"(?:True|False)(?![A-Za-z0-9_-])")
# The words for true or false of other formats (YAML's, INI files').
_OTHER_BOOLEAN_RE: Final = re.compile(r"(?i:yes|no|on|off)(?![A-Za-z0-9_-])")
# A unit after a number (30s, 512M, 1.5 h), where TOML ends the value at the number.
_UNIT_RE: Final = re.compile(r"[A-Za-z]")
_NUMBER_BEFORE_RE: Final = re.compile(r"[0-9][ \t]*\Z")
# What tomllib says when a value stops short of what follows it.
_CUT_SHORT: Final = ("Expected newline", "Unclosed array", "Unclosed inline table")


def syntax_error(text: str, error: str) -> str:
    """``error``, tomllib's of ``text``, with what to write instead where that is known."""
    declared = _DECLARED_RE.match(error)
    if declared is not None:
        table = ".".join(_written(k) for k in ast.literal_eval(declared[1]))
        error = f"Cannot declare [{table}] twice{error[declared.end() :]}"
        return f"{error}; write each table once, with all its keys under it"
    if error.startswith("Cannot overwrite"):
        return f"{error}; a key is set twice: write each key once in its table"
    at = _offset(text, _AT_LINE_RE.search(error))
    if error.startswith("Invalid value"):
        if at is not None and _PYTHON_BOOLEAN_RE.match(text, at):
            return f"{error}; write true or false in lower case"
        if at is not None and _OTHER_BOOLEAN_RE.match(text, at):
            return (
                f'{error}; write true or false for a switch (text values need quotes: key = "...")'
            )
        return f'{error}; text values need quotes: key = "..."'
    if error.startswith(_CUT_SHORT) and at is not None and _unit_at(text, at):
        return (
            f"{error}; a number takes no unit: a time is a number of seconds (30), "
            'a size with a unit is text ("512M")'
        )
    return error


def _written(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else json.dumps(key, ensure_ascii=False)


def _offset(text: str, at: re.Match[str] | None) -> int | None:
    """Where in ``text`` tomllib's position is. Lines are counted as tomllib counts
    them, by ``\\n`` alone."""
    if at is None:
        return None
    start = 0
    for _ in range(int(at[1]) - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    return start + int(at[2]) - 1


def _unit_at(text: str, at: int) -> bool:
    """Whether a letter at ``at`` follows a number on its line (``30s``)."""
    line_start = text.rfind("\n", 0, at) + 1
    before = text[line_start:at]
    return _UNIT_RE.match(text, at) is not None and _NUMBER_BEFORE_RE.search(before) is not None
