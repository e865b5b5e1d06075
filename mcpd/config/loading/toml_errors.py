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


def syntax_error(text: str, error: str) -> str:
    """``error``, tomllib's of ``text``, with what to write instead where that is known."""
    declared = _DECLARED_RE.match(error)
    if declared is not None:
        table = ".".join(_written(k) for k in ast.literal_eval(declared[1]))
        error = f"Cannot declare [{table}] twice{error[declared.end() :]}"
        return f"{error}; write each table once, with all its keys under it"
    if error.startswith("Cannot overwrite"):
        return f"{error}; a key is set twice: write each key once in its table"
    if error.startswith("Invalid value"):
        if _python_boolean_at(text, _AT_LINE_RE.search(error)):
            return f"{error}; write true or false in lower case"
        return f'{error}; text values need quotes: key = "..."'
    return error


def _written(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else json.dumps(key, ensure_ascii=False)


def _python_boolean_at(text: str, at: re.Match[str] | None) -> bool:
    """Whether the value at tomllib's position is ``True`` or ``False``. Lines are
    counted as tomllib counts them, by ``\\n`` alone."""
    if at is None:
        return False
    start = 0
    for _ in range(int(at[1]) - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return False
    return _PYTHON_BOOLEAN_RE.match(text, start + int(at[2]) - 1) is not None
