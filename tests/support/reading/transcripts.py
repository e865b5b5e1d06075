"""The ```console blocks of the documentation, read as transcripts, and the matching of
what a command printed against what the documentation says it prints.

A block is ``$ command`` lines, each followed by its output. A command that ends in a
backslash, or in an open quote, goes on over the next lines. In an expected line,
``...`` stands for any text within that line; a line that is only ``...`` stands for
any number of lines (none too). Trailing spaces and trailing empty lines do not count.

An HTML comment on the line before a fence says what the block needs:
``<!-- console: serve FILE -->``, ``<!-- console: no daemon -->``, ``<!-- console:
covered by tests/PATH.py -->``; and ``<!-- file: NAME -->`` before a fenced block of any
kind makes that block's text a file of the example's working directory (``<!-- append:
NAME -->`` adds it to the end of that file), for the console blocks after it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ELLIPSIS: Final = "..."
_FENCE: Final = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_MARKER: Final = re.compile(r"^\s*<!--\s*(?P<kind>console|file|append):\s*(?P<text>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Command:
    line: int  # 1-based, in the document
    text: str  # what bash runs (continuation lines included)
    expected: list[str]


@dataclass(frozen=True)
class FileExample:
    name: str
    text: str
    append: bool  # added to the end of the file the document wrote before


@dataclass(frozen=True)
class Block:
    doc: Path
    index: int  # the how-manieth console block of its document
    line: int  # of the opening fence
    needs: str  # "demo", "serve FILE", "no daemon" or "covered by PATH"
    files: list[FileExample] = field(default_factory=list)  # written before it, in order
    commands: list[Command] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"


@dataclass
class _Fenced:
    lang: str
    line: int
    marker: tuple[str, str] | None
    body: list[str]
    first: int  # line index (0-based) of the first body line
    last: int  # line index of the closing fence


def _fenced(lines: list[str]) -> list[_Fenced]:
    out: list[_Fenced] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group("indent")
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = [
            ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : j]
        ]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = _MARKER.match(lines[k]) if k >= 0 else None
        marker = (mk.group("kind"), mk.group("text")) if mk else None
        out.append(_Fenced(m.group("lang"), i + 1, marker, body, i + 1, j))
        i = j + 1
    return out


def blocks(doc: Path) -> list[Block]:
    """The console blocks of ``doc``, each with the example files written before it."""
    files: list[FileExample] = []
    found: list[Block] = []
    for f in _fenced(doc.read_text().splitlines()):
        if f.marker is not None and f.marker[0] in ("file", "append"):
            text = "\n".join(f.body) + "\n"
            files.append(FileExample(f.marker[1], text, f.marker[0] == "append"))
        if f.lang != "console":
            continue
        needs = f.marker[1] if f.marker is not None and f.marker[0] == "console" else "demo"
        found.append(Block(doc, len(found), f.line, needs, list(files), _commands(f)))
    return found


def _commands(f: _Fenced) -> list[Command]:
    commands: list[Command] = []
    i = 0
    body = f.body
    while i < len(body):
        if not body[i].startswith("$ "):
            raise ValueError(f"{f.line + i + 1}: a console block must start with '$ command'")
        line = f.line + i + 1
        text = body[i][2:]
        while (text.endswith("\\") or not _whole(text)) and i + 1 < len(body):
            i += 1
            text += "\n" + body[i]
        i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        commands.append(Command(line, text, _trimmed(expected)))
    return commands


def _whole(command: str) -> bool:
    """Whether every quote the command opens is closed (else it goes on)."""
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def _trimmed(lines: list[str]) -> list[str]:
    out = [ln.rstrip() for ln in lines]
    while out and not out[-1]:
        out.pop()
    return out


def output_lines(text: str) -> list[str]:
    return _trimmed(text.splitlines())


def line_matches(pattern: str, line: str) -> bool:
    if ELLIPSIS not in pattern:
        return pattern == line
    parts = [re.escape(p) for p in pattern.split(ELLIPSIS)]
    return re.fullmatch(".*".join(parts), line, re.S) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is what ``expected`` describes, ``...`` lines spanning any."""
    # reach[j]: the first i expected lines can account for the first j actual ones.
    reach = [True] + [False] * len(actual)
    for pattern in expected:
        if pattern == ELLIPSIS:
            for j in range(1, len(reach)):
                reach[j] = reach[j] or reach[j - 1]
            continue
        reach = [False] + [
            reach[j] and line_matches(pattern, actual[j]) for j in range(len(actual))
        ]
    return reach[-1]


def merged(expected: list[str], actual: list[str]) -> list[str]:
    """``actual``, keeping each expected line (with its ``...``) that still matches the
    line in its place: the new expectation after an update."""
    return [
        e if e != ELLIPSIS and line_matches(e, a) else a
        for e, a in zip(expected + [""] * len(actual), actual, strict=False)
    ]


def rewrite(block: Block, outputs: dict[int, list[str]]) -> None:
    """Put new expected outputs (by the command's place in the block) into the block
    as its document has it now."""
    lines = block.doc.read_text().splitlines(keepends=True)
    fenced = [f for f in _fenced([ln.rstrip("\n") for ln in lines]) if f.lang == "console"]
    f = fenced[block.index]
    indent = _FENCE.match(lines[f.line - 1].rstrip("\n"))
    pad = indent.group("indent") if indent else ""
    new_body: list[str] = []
    for n, cmd in enumerate(_commands(f)):
        new_body.extend(pad + t for t in ("$ " + cmd.text).split("\n"))
        out = outputs.get(n, cmd.expected)
        new_body.extend((pad + t).rstrip() for t in out)
    text = "".join(lines[: f.first]) + "".join(b + "\n" for b in new_body)
    block.doc.write_text(text + "".join(lines[f.last :]))
