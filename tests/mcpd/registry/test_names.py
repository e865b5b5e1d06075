"""Local names for prompts, by the tools' rules: the template's name when it is short
enough and nobody else wants it, else a hashed name that no other key takes (a plain
name included), whatever order the keys come in."""

from __future__ import annotations

from mcpd.config.model import NamingConfig
from mcpd.registry.names import assign
from mcpd.registry.table import hashed_name

NAMING = NamingConfig()


def test_a_name_is_the_templates_when_short_and_unclaimed() -> None:
    assert assign(NAMING, [("notes", "daily"), ("git", "review")]) == {
        ("notes", "daily"): "mcp__notes__daily",
        ("git", "review"): "mcp__git__review",
    }


def test_names_that_clash_are_each_hashed() -> None:
    # "a.b" and "a_b" read alike once made into a name.
    got = assign(NAMING, [("s", "a.b"), ("s", "a_b")])
    assert got[("s", "a.b")] == hashed_name("mcp__s__a_b", "s", "a.b", 64)
    assert got[("s", "a_b")] == hashed_name("mcp__s__a_b", "s", "a_b", 64)
    assert len(set(got.values())) == 2


def test_a_long_name_is_cut_and_hashed_to_the_limit() -> None:
    naming = NamingConfig(max_length=20)
    got = assign(naming, [("notes", "a_very_long_prompt_name")])[
        ("notes", "a_very_long_prompt_name")
    ]
    assert len(got) <= 20 and got.startswith("mcp__notes__a")


def test_the_result_does_not_depend_on_the_order_of_the_keys() -> None:
    keys = [("s", "a.b"), ("s", "a_b"), ("t", "x"), ("s", "x" * 80)]
    assert assign(NAMING, keys) == assign(NAMING, list(reversed(keys)))
    assert assign(NAMING, keys + keys) == assign(NAMING, keys)


def test_a_plain_name_never_takes_a_hashed_one() -> None:
    """Anyone can compute a hashed name: a prompt listed under another's hashed name is
    the one hashed, and the name stays the other's, whatever order the keys come in."""
    naming = NamingConfig(template="{tool}")
    taken = hashed_name("daily", "notes", "daily", 64)  # notes' prompt, clashing with evil's
    keys = [("notes", "daily"), ("evil", "daily"), ("evil", taken)]
    for order in (keys, list(reversed(keys))):
        got = assign(naming, order)
        assert got[("notes", "daily")] == taken
        assert got[("evil", taken)] not in (taken, "daily")
        assert len(set(got.values())) == 3


def test_a_long_name_hashed_to_anothers_plain_name_moves_that_one() -> None:
    naming = NamingConfig(template="{tool}", max_length=16)
    long = "p" * 20
    plain = hashed_name(long, "s", long, 16)  # a prompt whose plain name is that hash
    got = assign(naming, [("s", long), ("s", plain)])
    assert got[("s", long)] == plain
    assert got[("s", plain)] != plain and len(got[("s", plain)]) <= 16
