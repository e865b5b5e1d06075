"""Where mcpd cut a server's text short inside a secret: the beginning of the secret
before each note of a cut is found, whose it is named, and nothing that is not a
beginning of a secret, too short to be one, or past the last notes is taken."""

from __future__ import annotations

import pytest

from mcpd.policy.redaction.cutparts import CUT_NOTES, CUT_PART, CutParts, border_table, overlap
from protocol.shown.visible import cut

SECRET = "tok-7Hq2ZpX9wLmR"
OTHER = "pass-Vn3KdWq8"


def note(more: int = 12) -> str:
    return cut("x" * (more + 1), 1)[1:]


@pytest.mark.parametrize(
    ("value", "table"),
    [
        ("abcd", [0, 0, 0, 0]),
        ("aaaa", [0, 1, 2, 3]),
        ("abab", [0, 0, 1, 2]),
        ("aabaaab", [0, 1, 0, 1, 2, 2, 3]),
    ],
)
def test_the_border_table_is_each_beginnings_longest_proper_border(
    value: str, table: list[int]
) -> None:
    assert list(border_table(value)) == table


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("say tok-7Hq", 7),
        ("tok-tok-7H", 6),
        ("no secret here", 0),
        (f"whole {SECRET}", 0),  # all of it is no beginning cut short
    ],
)
def test_the_overlap_is_the_longest_beginning_the_text_ends_with(text: str, length: int) -> None:
    assert overlap(SECRET, border_table(SECRET), text, 0, len(text)) == length


def test_overlap_reads_only_the_span_it_is_given() -> None:
    text = "tok-7Hq and more"
    assert overlap(SECRET, border_table(SECRET), text, 0, 7) == 7
    assert overlap(SECRET, border_table(SECRET), text, 1, 7) == 0


def test_a_secret_cut_short_by_mcpd_is_found_and_named() -> None:
    text = cut(f"token={SECRET}; and the rest", 6 + 9)
    assert text.startswith("token=tok-7Hq2Z\u2026 (and ")
    assert CutParts({SECRET: "servers.s.env.TOKEN"}).parts(text) == [(6, 15, "servers.s.env.TOKEN")]


def test_the_longest_beginning_among_the_secrets_wins() -> None:
    parts = CutParts({"tok-7": "short", SECRET: "long", OTHER: "other"})
    text = f"tok-7Hq2{note()}"
    assert parts.parts(text) == [(0, 8, "long")]


def test_fewer_characters_than_a_beginning_needs_are_any_texts_end() -> None:
    parts = CutParts({SECRET: "s"})
    assert parts.parts(f"x{SECRET[: CUT_PART - 1]}{note()}") == []
    assert parts.parts(f"x{SECRET[:CUT_PART]}{note()}") == [(1, 1 + CUT_PART, "s")]


def test_text_without_a_note_or_with_no_secrets_is_not_searched() -> None:
    assert CutParts({SECRET: "s"}).parts(f"{SECRET[:8]} (and then some)") == []
    assert CutParts({}).parts(f"{SECRET[:8]}{note()}") == []


def test_each_note_looks_back_no_further_than_the_note_before_it() -> None:
    parts = CutParts({SECRET: "s", OTHER: "o"})
    text = f"{SECRET[:6]}{note()}{OTHER[:5]}{note()}{note()}"
    first_end = 6 + len(note())
    assert parts.parts(text) == [(0, 6, "s"), (first_end, first_end + 5, "o")]


def test_only_the_last_notes_of_a_text_are_looked_at() -> None:
    piece = f" {SECRET[:6]}{note()}"
    text = piece * (CUT_NOTES + 2)
    found = CutParts({SECRET: "s"}).parts(text)
    assert len(found) == CUT_NOTES
    assert found[0][0] == 2 * len(piece) + 1
    assert found[-1][1] == len(text) - len(note())
