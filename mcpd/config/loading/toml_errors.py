"""What tomllib says of a file it cannot read, said with the line it names and, for the
mistakes a person makes most, what to write instead: a string left unquoted, a
``True`` written as Python writes it, a table declared twice (named as the file writes
it, ``[servers.notes]``), a key set twice."""

from __future__ import annotations

import ast
import json
import re
from typing import Final, NamedTuple

from protocol.visible import visible

__all__ = ["syntax_error"]

# Where tomllib's message says the file went wrong, and a line that starts a table.
_AT_LINE_RE: Final = re.compile(r"\(at line ([0-9]+), column ([0-9]+)\)\Z")
_HEADER_RE: Final = re.compile(r"\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?\Z")
_DECLARED_RE: Final = re.compile(r"Cannot declare (\(.*\)) twice")
_BARE_KEY_RE: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
# The start of a value TOML has: a string, an array, an inline table, a number, a date.
_VALUE_START: Final = tuple("\"'[{+-0123456789")
# What the line of an error is cut to: the start of it shows which line it is. No more
# of it than that is examined, so a long line costs no more than a short one.
_SHOWN: Final = 120
_EXAMINED: Final = 4 * _SHOWN
# What stands between a line's keys and values; and the words that are not TOML's true
# or false only in how they are written, which a line may show at its error.
_MARKS: Final = frozenset("=,[]{}")
_BOOLEAN_SLIPS: Final = frozenset({"true", "false", "yes", "no", "on", "off"})


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


class _Token(NamedTuple):
    start: int
    text: str
    is_key: bool


def _tokens(line: str, column: int) -> list[_Token]:
    """The keys and values of ``line`` (its comment left out), each with where it
    starts; the punctuation and spaces between them are not tokens. On a line that
    looks like it starts a table, its unquoted words but the one at ``column`` are keys:
    the line may be one of an array's, whose strings are values. On any other a word or
    string is a key only where a key may stand (the line's start, an inline table's
    start or after its comma) and a ``=`` follows it, alone or after more keys joined
    by dots."""
    spans: list[tuple[int, int]] = []  # a word's or a string's, else (i, i) for a mark
    i = 0
    while i < len(line) and line[i] != "#":
        c = line[i]
        if c in " \t":
            i += 1
            continue
        if c in _MARKS:
            spans.append((i, i))
            i += 1
            continue
        j = _string_end(line, i) if c in "\"'" else _word_end(line, i)
        spans.append((i, j))
        i = j
    header = line.lstrip().startswith("[") and not any(line[a] in "=," for a, b in spans if a == b)
    tokens: list[_Token] = []
    depth: list[str] = []
    chain: list[tuple[int, int]] = []  # the words and strings since the last mark
    key_here = True
    for a, b in [*spans, (len(line), len(line))]:
        if a != b:
            chain.append((a, b))
            continue
        mark = line[a] if a < len(line) else ""
        if header:
            tokens += [_Token(x, line[x:y], x != column and _bare(line[x])) for x, y in chain]
        else:
            tokens += [_Token(x, line[x:y], key_here and mark == "=") for x, y in chain]
        chain = []
        if mark in "[{":
            depth.append(mark)
        elif mark in "]}" and depth:
            depth.pop()
        key_here = mark == "{" or (mark == "," and depth[-1:] == ["{"])
    return tokens


def _string_end(line: str, i: int) -> int:
    """Where the string that starts at ``i`` ends (the line's end if it does not)."""
    quote = line[i]
    if line.startswith(quote * 3, i):
        end = line.find(quote * 3, i + 3)
        return len(line) if end < 0 else end + 3
    j = i + 1
    while j < len(line) and line[j] != quote:
        j += 2 if quote == '"' and line[j] == "\\" else 1
    return min(j + 1, len(line))


def _bare(first: str) -> bool:
    return first not in "\"'"


def _word_end(line: str, i: int) -> int:
    j = i
    while j < len(line) and line[j] not in _MARKS and line[j] not in " \t#\"'":
        j += 1
    return j


def _at(tokens: list[_Token], column: int) -> _Token | None:
    """The value that starts at ``column``, where one does."""
    return next((t for t in tokens if t.start == column and not t.is_key), None)


def _shown(line: str, column: int) -> str:
    """The line as an error shows it: its keys as written, each value (a string, a word,
    a number, what an inline table or array holds) as ``***`` but for a word at
    ``column`` that only slips in how true or false is written, its comment left out;
    cut to a length a terminal line holds, what would act on a terminal escaped."""
    examined = line[:_EXAMINED]
    tokens = _tokens(examined, column)
    slip = _at(tokens, column)
    shown, last = [], 0
    for t in tokens:
        shown.append(examined[last : t.start])
        keep = t.is_key or (t is slip and t.text.lower() in _BOOLEAN_SLIPS)
        shown.append(t.text if keep else "***")
        last = t.start + len(t.text)
    rest = examined[last:].split("#", 1)[0]
    text = ("".join(shown) + rest).strip()
    return visible(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _value_hint(line: str, column: int) -> str | None:
    """What a value TOML could not read, starting at ``column``, most likely lacks. The
    hint quotes no value but a word that only slips in how true or false is written."""
    examined = line[:_EXAMINED]
    if column >= len(examined) and len(line) > len(examined):
        return None
    value = examined[column:].split("#", 1)[0].strip()
    if not value:
        return "the key has no value"
    if value.startswith(_VALUE_START):
        return None
    tokens = _tokens(examined, column)
    word = _at(tokens, column)
    if word is not None and word.text in ("True", "False"):
        return f"true and false are written in lower case: {word.text.lower()}"
    if word is not None and word.text.lower() in _BOOLEAN_SLIPS:
        return f'strings need quotes: "{word.text}"'
    return "strings need quotes"


def _set_again(lines: list[str], number: int) -> str:
    """For tomllib's "Cannot overwrite a value", which names a line but not the key: the
    key that line sets, in the table it is in (its dotted path as written)."""
    line = lines[number - 1][:_EXAMINED]
    header = _HEADER_RE.match(line)
    if header is not None:
        return f": {header[1]} is set twice"
    if "=" not in line:
        return ""
    key = line.split("=", 1)[0].strip()
    above = (_HEADER_RE.match(before[:_EXAMINED]) for before in reversed(lines[: number - 1]))
    table = next((h[1] for h in above if h is not None), None)
    return f": {table + '.' if table else ''}{key} is set twice"
