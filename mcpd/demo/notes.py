"""The notes demo server: search and read a small set of text notes.

    python -m mcpd.demo.notes                  # stdio (--http HOST:PORT works too)
    python -m mcpd.demo.notes --dir ~/notes    # or NOTES_DIR=~/notes

Notes come from the ``.md`` and ``.txt`` files in ``--dir`` or ``$NOTES_DIR``, or
from a built-in set that includes ``handbook``, a note longer than 20,000
characters (for testing large results). ``tools/list`` returns two tools per page,
so a client has to follow ``nextCursor`` to see all three.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from protocol.jsonrpc import messages as rpc

from .arguments import integer_argument, string_argument
from .main import run_demo
from .runtime import DemoServer, ToolContext, ToolError, object_schema

PAGE_SIZE = 2
SNIPPET = 80

_BUILTIN: dict[str, str] = {
    "welcome": (
        "# Welcome\n\nThese are the built-in demo notes of mcpd. Point NOTES_DIR at a "
        "folder of .md or .txt files to serve your own notes instead.\n"
    ),
    "groceries": "# Groceries\n\n- oat milk\n- coffee beans\n- lemons\n- basil\n",
    "meeting-2026-03-02": (
        "# Meeting notes, 2 March 2026\n\nAgreed to move the breaker cooldown into the "
        "config file. Open question: should a half-open probe use tools/list or a ping?\n"
    ),
    "recipes": (
        "# Pasta al limone\n\nBoil pasta. Melt butter, add lemon zest and juice, a splash "
        "of pasta water and parmesan. Toss, season, add basil.\n"
    ),
}

_TOPICS = (
    "installation",
    "configuration files",
    "server aliases",
    "tool naming",
    "trusted servers",
    "circuit breakers",
    "restarts and backoff",
    "timeouts",
    "logging and the journal",
    "status reports",
    "upgrades",
    "troubleshooting",
)


def handbook() -> str:
    """A long note, the same on every run: 36 numbered sections over 12 topics."""
    parts = ["# mcpd operations handbook\n"]
    for n in range(1, 37):
        topic = _TOPICS[(n - 1) % len(_TOPICS)]
        parts.append(
            f"\n## {n}. On {topic} (part {(n - 1) // len(_TOPICS) + 1})\n\n"
            f"Section {n} covers {topic}. Read it once before changing anything that "
            f"touches {topic}, and keep a copy of the old configuration nearby. Every "
            f"change should be made on one server first, checked with `mcpd status`, and "
            f"only then rolled out to the rest of the fleet.\n\n"
            f"When {topic} goes wrong, the journal says so first: look for MCPD_EVENT "
            f"fields near the time of the problem, note the server alias, and compare the "
            f"tool list before and after. Most problems with {topic} come from a stale "
            f"configuration or a server that changed its tools without telling anyone.\n\n"
            f"Checklist {n}: confirm the alias, confirm the command line, confirm the "
            f"environment, restart once, and write down what you saw.\n"
        )
    parts.append("\n-- end of handbook --\n")
    return "".join(parts)


def load_notes(directory: str | None) -> dict[str, str]:
    if not directory:
        return {**_BUILTIN, "handbook": handbook()}
    notes: dict[str, str] = {}
    for path in sorted(Path(directory).iterdir()):
        if path.is_file() and path.suffix in (".md", ".txt"):
            name = path.stem if path.stem not in notes else path.name
            notes[name] = path.read_text(encoding="utf-8", errors="replace")
    return notes


def snippet(text: str, start: int, length: int) -> str:
    begin = max(0, start - SNIPPET // 2)
    end = min(len(text), start + length + SNIPPET // 2)
    body = " ".join(text[begin:end].split())
    return ("…" if begin > 0 else "") + body + ("…" if end < len(text) else "")


def build_notes(notes: Mapping[str, str]) -> DemoServer:
    server = DemoServer(
        "notes",
        instructions="Search notes with `search`, then read one in full with `read_note`.",
        page_size=PAGE_SIZE,
    )

    @server.tool(
        "Search the notes for a word or phrase (case-insensitive). Returns the names of "
        "matching notes, each with a snippet around the first match.",
        object_schema(
            {
                "query": {"type": "string", "minLength": 1, "description": "text to find"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            },
            ["query"],
        ),
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
    async def search(args: rpc.JsonObject, ctx: ToolContext) -> str:
        asked = string_argument(args, "query")
        query = asked.lower()
        hits = []
        for name, text in notes.items():
            at = text.lower().find(query)
            if at >= 0:
                hits.append(f"{name}: {snippet(text, at, len(query))}")
            elif query in name.lower():
                hits.append(f"{name}: {snippet(text, 0, 0)}")
        if not hits:
            return f"No notes match {asked!r}."
        return "\n".join(hits[: integer_argument(args, "limit", 10)])

    @server.tool(
        "Read one note in full.",
        object_schema({"name": {"type": "string", "description": "as listed"}}, ["name"]),
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
    async def read_note(args: rpc.JsonObject, ctx: ToolContext) -> str:
        name = string_argument(args, "name")
        text = notes.get(name)
        if text is None:
            raise ToolError(f"No note named {name!r}; known notes: {', '.join(notes)}")
        return text

    @server.tool(
        "List the names of all notes with their sizes.",
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
    async def list_notes(args: rpc.JsonObject, ctx: ToolContext) -> str:
        if not notes:
            return "There are no notes."
        return "\n".join(f"{name} ({len(text)} characters)" for name, text in notes.items())

    return server


def main(argv: list[str] | None = None) -> None:
    # --dir is this server's own flag; everything else is the runtime's.
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--dir")
    own, rest = parser.parse_known_args(argv)
    directory = own.dir or os.environ.get("NOTES_DIR")
    if directory and not Path(directory).is_dir():
        sys.exit(f"notes: {directory!r} is not a directory")
    run_demo(build_notes(load_notes(directory)), rest)


if __name__ == "__main__":
    main(sys.argv[1:])
