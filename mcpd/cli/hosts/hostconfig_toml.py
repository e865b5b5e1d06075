"""A TOML file edited as text: one ``[PARENT.NAME]`` table replaced or appended.

Rewriting a whole TOML file would lose its comments and layout, and the stdlib only
reads TOML. So the file is scanned line by line for table headers (outside multi-line
strings and arrays), the lines of ``[PARENT.NAME]`` and of its sub-tables are cut out,
and the new table goes where the first of them was, or at the end, its lines ended as
the file's are. The result is parsed again and must equal the old data with only that
entry changed (floats compared as written, so a ``nan`` equals itself).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Final

_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")
_KEY: Final = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_HEADER: Final = re.compile(
    rf"^\s*(\[\[?)\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]\]?\s*(?:#.*)?$"
)  # fmt: skip
_PART: Final = re.compile(_KEY)
_LINE: Final = re.compile(r"[^\n]*\n|[^\n]+")


def merge_toml(existing: str, parent: str, name: str, body: Mapping[str, object]) -> str:
    try:
        old = _parse(existing)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}; fix it or add the entry by hand") from None
    servers = old.get(parent, {})
    if not isinstance(servers, dict):
        raise ValueError(f"{parent!r} is not a table")
    # TOML ends a line with LF or CRLF alone; a CR stays with the line it ends.
    lines = _LINE.findall(existing)
    first = lines[0] if lines else ""
    eol = "\r\n" if first.endswith("\r\n") else "\n"
    headers = _headers(lines)
    ours = [n for n, (_, path) in enumerate(headers) if path[:2] == (parent, name)]
    if name in servers and not ours:
        raise ValueError(
            f"{parent}.{name} is written inline or with dotted keys, which mcpd does not "
            f"edit; replace it with a [{parent}.{name}] table by hand"
        )
    block = render_table(parent, name, body).replace("\n", eol)
    if ours:
        cut: set[int] = set()
        for n in ours:
            start = headers[n][0]
            end = headers[n + 1][0] if n + 1 < len(headers) else len(lines)
            # Comments and blank lines just above the next header belong to that table.
            while end > start + 1 and _blank_or_comment(lines[end - 1]):
                end -= 1
            cut.update(range(start, end))
        first = headers[ours[0]][0]
        out = [line for i, line in enumerate(lines[:first]) if i not in cut]
        if out and not out[-1].endswith("\n"):
            out[-1] += eol
        rest = [line for i, line in enumerate(lines[first:], first) if i not in cut]
        while rest and not rest[0].strip():  # what separated the cut tables
            rest.pop(0)
        out.append(block)
        if rest:
            out.append(eol)
        out += rest
    else:
        out = list(lines)
        if out and not out[-1].endswith("\n"):
            out[-1] += eol
        if out and out[-1].strip():
            out.append(eol)
        out.append(block)
    text = "".join(out)
    try:
        got = _parse(text)
    except tomllib.TOMLDecodeError as exc:
        # e.g. [PARENT] written as an inline table, which no [PARENT.NAME] may extend
        raise ValueError(
            f"adding [{parent}.{name}] would not parse ({exc}); add the entry by hand"
        ) from None
    expected = dict(old)
    expected[parent] = {**servers, name: body}
    if got != expected:
        raise ValueError(f"the edit would change more than [{parent}.{name}]; add it by hand")
    return text


def _parse(text: str) -> dict[str, object]:
    try:
        return tomllib.loads(text, parse_float=str)
    except RecursionError:
        raise ValueError("it is nested too deeply to read") from None


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _headers(lines: list[str]) -> list[tuple[int, tuple[str, ...]]]:
    """(line index, dotted key) of every table header, in order."""
    found: list[tuple[int, tuple[str, ...]]] = []
    depth = 0
    quote: str | None = None  # the delimiter of the multi-line string we are in
    for i, line in enumerate(lines):
        if quote is None and depth == 0 and (m := _HEADER.match(line)):
            found.append((i, tuple(_unquote(p) for p in _PART.findall(m.group(2)))))
            continue
        depth, quote = _scan(line, depth, quote)
    return found


def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None]:
    """Bracket depth and open multi-line string after ``line``."""
    i, n = 0, len(line)
    while i < n:
        if quote is not None:
            end = line.find(quote, i)
            while end > 0 and quote == '"""' and _escaped(line, end):
                end = line.find(quote, end + 1)
            if end < 0:
                return depth, quote
            i, quote = end + 3, None
            continue
        c = line[i]
        if c == "#":
            break
        if line.startswith(('"""', "'''"), i):
            quote = line[i : i + 3]
            i += 3
        elif c in "\"'":
            end = i + 1
            while end < n and line[end] != c:
                end += 2 if c == '"' and line[end] == "\\" else 1
            i = end + 1
        else:
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth = max(depth - 1, 0)
            i += 1
    return depth, quote


def _escaped(line: str, at: int) -> bool:
    backslashes = 0
    while at - backslashes - 1 >= 0 and line[at - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _unquote(part: str) -> str:
    if part.startswith('"'):
        return str(json.loads(part))
    if part.startswith("'"):
        return part[1:-1]
    return part


def render_table(parent: str, name: str, body: Mapping[str, object]) -> str:
    lines = [f"[{_key(parent)}.{_key(name)}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, except that TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value, allow_nan=False)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
