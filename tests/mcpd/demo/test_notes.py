"""The notes demo server's own logic in process: which files become notes and under
what names, the snippets its search shows, and what each tool answers, good and bad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from msgspec import Raw

from mcpd.demo import notes
from protocol.jsonrpc import messages as rpc
from tests.support.clients.demo import meta


async def call(server_notes: dict[str, str], tool: str, **arguments: Any) -> tuple[bool, str]:
    """Whether the call failed, and its text."""
    server = notes.build_notes(server_notes)
    params = {"name": tool, "arguments": arguments, "_meta": meta()}
    request = rpc.Request(1, "tools/call", Raw(json.dumps(params).encode()))

    async def no_notifications(message: bytes) -> None:
        raise AssertionError(message)

    reply = await server.handle(server.new_session(), request, no_notifications)
    result = json.loads(reply.message)["result"]
    return bool(result.get("isError")), str(result["content"][0]["text"])


NOTES = {
    "alpha": "The Quick brown fox.",
    "beta": "Nothing here about foxes? Yes: a FOX.",
    "fox-facts": "Nothing.",
}


def test_the_built_in_notes_include_a_long_handbook_the_same_every_time() -> None:
    builtin = notes.load_notes(None)
    assert set(builtin) == {"welcome", "groceries", "meeting-2026-03-02", "recipes", "handbook"}
    assert len(builtin["handbook"]) > 20_000
    assert builtin["handbook"] == notes.handbook()
    assert builtin["handbook"].endswith("-- end of handbook --\n")
    assert notes.load_notes("") == builtin


def test_a_directorys_md_and_txt_files_are_its_notes(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("bee")
    (tmp_path / "a.txt").write_text("ay")
    (tmp_path / "c.json").write_text("{}")
    (tmp_path / "sub.md").mkdir()
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    loaded = notes.load_notes(str(tmp_path))
    assert loaded == {"a": "ay", "b": "bee", "bad": "caf\ufffd"}
    assert list(loaded) == ["a", "b", "bad"]


def test_two_files_of_one_stem_both_stay_the_second_under_its_full_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "x.md").write_text("markdown")
    (tmp_path / "x.txt").write_text("text")
    assert notes.load_notes(str(tmp_path)) == {"x": "markdown", "x.txt": "text"}


def test_an_empty_directory_has_no_notes(tmp_path: Path) -> None:
    assert notes.load_notes(str(tmp_path)) == {}


@pytest.mark.parametrize(
    ("text", "start", "length", "shown"),
    [
        ("short  text\n here", 0, 5, "short text here"),
        ("a" * 100 + "HIT" + "b" * 100, 100, 3, "…" + "a" * 40 + "HIT" + "b" * 40 + "…"),
        ("HIT" + "b" * 100, 0, 3, "HIT" + "b" * 40 + "…"),
        ("a" * 100 + "HIT", 100, 3, "…" + "a" * 40 + "HIT"),
        ("x" + "a" * 40 + "HIT", 41, 3, "…" + "a" * 40 + "HIT"),
        ("", 0, 0, ""),
    ],
    ids=["whitespace", "middle", "start", "end", "one-cut", "empty"],
)
def test_a_snippet_shows_around_the_match_and_marks_what_it_cut(
    text: str, start: int, length: int, shown: str
) -> None:
    assert notes.snippet(text, start, length) == shown


async def test_search_finds_text_and_names_whatever_their_case() -> None:
    failed, text = await call(NOTES, "search", query="FoX")
    assert not failed
    assert text.splitlines() == [
        "alpha: The Quick brown fox.",
        "beta: Nothing here about foxes? Yes: a FOX.",
        "fox-facts: Nothing.",
    ]


async def test_search_matches_a_name_whatever_its_case_showing_the_notes_start() -> None:
    _, text = await call({"Zoo-FOX": "Nothing of note."}, "search", query="fox")
    assert text == "Zoo-FOX: Nothing of note."


async def test_search_gives_at_most_the_limit() -> None:
    _, text = await call(NOTES, "search", query="fox", limit=2)
    assert [line.split(":")[0] for line in text.splitlines()] == ["alpha", "beta"]


async def test_a_limit_written_with_a_fraction_of_zero_is_that_limit() -> None:
    """JSON has one number type: ``2.0`` is the integer 2, as the schema check says."""
    assert await call(NOTES, "search", query="fox", limit=2.0) == await call(
        NOTES, "search", query="fox", limit=2
    )


async def test_search_says_when_nothing_matches_quoting_the_query() -> None:
    assert await call(NOTES, "search", query="Zebra's") == (False, 'No notes match "Zebra\'s".')


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"query": ""}, "argument 'query' must have at least 1 characters"),
        ({"query": "x", "limit": 0}, "argument 'limit' must be at least 1"),
        ({"query": "x", "limit": 101}, "argument 'limit' must be at most 100"),
        ({}, "missing required argument 'query'"),
    ],
)
async def test_search_refuses_bad_arguments(arguments: dict[str, Any], problem: str) -> None:
    assert await call(NOTES, "search", **arguments) == (
        True,
        f"Invalid arguments for search: {problem}",
    )


async def test_read_note_gives_the_whole_note() -> None:
    assert await call(NOTES, "read_note", name="beta") == (False, NOTES["beta"])


async def test_read_note_of_an_unknown_name_lists_the_known_ones() -> None:
    assert await call(NOTES, "read_note", name="gamma") == (
        True,
        "No note named 'gamma'; known notes: alpha, beta, fox-facts",
    )


async def test_list_notes_gives_names_and_sizes_or_says_there_are_none() -> None:
    assert await call(NOTES, "list_notes") == (
        False,
        "alpha (20 characters)\nbeta (37 characters)\nfox-facts (8 characters)",
    )
    assert await call({}, "list_notes") == (False, "There are no notes.")


def test_the_server_lists_two_tools_a_page_and_says_how_to_use_them() -> None:
    server = notes.build_notes(NOTES)
    assert server.page_size == 2
    assert [t.name for t in server.tools] == ["search", "read_note", "list_notes"]
    assert server.instructions is not None and "read_note" in server.instructions
    assert all(
        t.annotations == {"readOnlyHint": True, "openWorldHint": False} for t in server.tools
    )


def test_a_notes_directory_that_is_not_one_stops_the_server_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTES_DIR", raising=False)
    missing = str(tmp_path / "nowhere")
    with pytest.raises(SystemExit) as info:
        notes.main(["--dir", missing])
    assert info.value.code == f"notes: {missing!r} is not a directory"
    a_file = tmp_path / "file.md"
    a_file.write_text("x")
    monkeypatch.setenv("NOTES_DIR", str(a_file))
    with pytest.raises(SystemExit) as info:
        notes.main([])
    assert info.value.code == f"notes: {str(a_file)!r} is not a directory"
