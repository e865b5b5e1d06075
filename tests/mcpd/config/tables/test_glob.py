"""``Glob``: the shell patterns policy rules and tool filters are written in, matched
as ``fnmatch.fnmatchcase`` matches them, and in work bounded by the name's length
times the pattern's whatever name a server or an agent chooses."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mcpd.config.tables import glob
from mcpd.config.tables.glob import Glob, is_glob

SPECIAL = "*?[]!-"


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("read_file", ["read_file"], ["read_files", "Read_file", "", "read_fil"]),
        ("*", ["", "anything"], []),
        ("read_*", ["read_", "read_file"], ["rea", "xread_file"]),
        ("*_file", ["_file", "read_file"], ["read_files"]),
        ("*secret*", ["secret", "my_secret_key"], ["secre", "SECRET"]),
        ("a*b*c", ["abc", "a_b_c", "abbc", "acbc"], ["ab", "acb", "bac"]),
        ("a**b", ["ab", "a_b"], ["a"]),
        ("?", ["x", "?"], ["", "xy"]),
        ("??_*", ["ab_", "ab_c"], ["a_", "abc"]),
        ("[abc]x", ["ax", "cx"], ["dx", "x", "[x"]),
        ("[a-c]", ["a", "b", "c"], ["d", "-"]),
        ("[!a-c]", ["d", "-"], ["a", "c", ""]),
        ("[]]", ["]"], ["[", "[]]"]),
        ("[!]]", ["a"], ["]"]),
        ("[a-]", ["a", "-"], ["b"]),
        ("[z-a]", [], ["a", "m", "z", "-"]),
        ("[!z-a]", ["a", "-"], [""]),
        ("[abc", ["[abc"], ["a"]),
        ("x[", ["x["], ["x"]),
        ("*[0-9]", ["v1", "9"], ["v", "v1a"]),
        ("*[!_]*", ["a", "_a_"], ["", "__"]),
        ("delete_*_?[!x]", ["delete_all_ab"], ["delete_all_ax", "delete__ab_"]),
    ],
)
def test_patterns_match_what_a_shell_pattern_matches(
    pattern: str, yes: Sequence[str], no: Sequence[str]
) -> None:
    compiled = Glob(pattern)
    for name in yes:
        assert compiled.match(name), (pattern, name)
        assert fnmatch.fnmatchcase(name, pattern)
    for name in no:
        assert not compiled.match(name), (pattern, name)
        assert not fnmatch.fnmatchcase(name, pattern)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="ab" + SPECIAL, max_size=8), st.text(alphabet="ab" + SPECIAL, max_size=8))
@example("*a*a*b", "aaaaaab")
@example("[!]-b]", "-")
@example("*?*?", "a")
def test_any_pattern_matches_as_fnmatch_does(pattern: str, name: str) -> None:
    # fnmatch drops a reversed range by splicing its neighbours, which can make a
    # following "!" read as a negation; mcpd reads that "!" as the character it is.
    assume(not re.search(r"-.!", pattern))
    assert Glob(pattern).match(name) == fnmatch.fnmatchcase(name, pattern)


def test_a_hostile_name_costs_at_most_its_length_times_the_patterns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Patterns that make a backtracking matcher try every split of the name: here
    each place of each segment is tried once at most."""
    tried = 0
    real = glob._at

    def counted(segment: Sequence[glob.Atom], text: str, pos: int) -> bool:
        nonlocal tried
        tried += 1
        return real(segment, text, pos)

    monkeypatch.setattr(glob, "_at", counted)
    name = "a" * 5000
    for pattern in ("*a?*a?*a?*a?*a?*a?*b", "*?a*?a*?a*?a*[b]", "[a]*[a]*[a]*[a]*[a]*c"):
        assert not Glob(pattern).match(name)
        assert tried <= len(name) * len(pattern)
        tried = 0


def test_matching_is_case_sensitive_and_unicode_is_characters() -> None:
    assert not Glob("Delete*").match("delete_all")
    assert Glob("?").match("é")
    assert Glob("[é-ë]").match("ê")
    assert Glob("*🙂").match("smile🙂")


def test_is_glob_tells_a_pattern_from_a_name() -> None:
    assert [is_glob(t) for t in ("read_file", "read_*", "a?", "[ab]", "a]b!-")] == [
        False,
        True,
        True,
        True,
        False,
    ]


def test_a_compiled_pattern_names_its_source() -> None:
    assert repr(Glob("mcp__*")) == "Glob('mcp__*')"
