"""Local names for prompts, by the tools' rules: the template's name when it is short
enough, nobody else wants it and it does not read as a hashed name, else a hashed name
lengthened while another's agrees with it, whatever order the keys come in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.config.tables.model import NamingConfig
from mcpd.registry.naming.names import assign
from mcpd.registry.naming.spelling import hashed_name
from mcpd.registry.tables.table import ToolTable
from protocol.mcp import core as mcp
from tests.support.parts.hash_twins import agreeing_names, short_hash

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


def test_a_long_name_hashed_to_a_lookalikes_name_keeps_it() -> None:
    naming = NamingConfig(template="{tool}", max_length=16)
    long = "p" * 20
    plain = hashed_name(long, "s", long, 16)  # a prompt whose plain name is that hash
    got = assign(naming, [("s", long), ("s", plain)])
    assert got[("s", long)] == plain
    assert got[("s", plain)] != plain and len(got[("s", plain)]) <= 16


def test_a_prompt_named_like_a_hashed_name_is_hashed_even_alone() -> None:
    name = "daily_" + short_hash("x", "y")
    got = assign(NAMING, [("notes", name)])
    assert got == {("notes", name): f"mcp__notes__{name}_{short_hash('notes', name)}"}


def long_prompt(alias: str, i: int) -> str:
    return ("b__" if alias == "a" else "") + "p" * 60 + str(i)


def test_hashed_names_that_agree_are_all_lengthened() -> None:
    evil, honest = agreeing_names("a", "a__b", long_prompt)
    (six,) = assign(NAMING, [("a__b", honest)]).values()
    keys = [("a", evil), ("a__b", honest)]
    for order in (keys, list(reversed(keys))):
        got = assign(NAMING, order)
        cut = six[: 64 - 9]
        assert got == {
            ("a", evil): f"{cut}_{short_hash('a', evil, 8)}",
            ("a__b", honest): f"{cut}_{short_hash('a__b', honest, 8)}",
        }


prompt_names = st.one_of(
    st.text(alphabet="ab._", min_size=1, max_size=4),
    st.builds(lambda n: "p" * n, st.integers(1, 70)),
    st.builds(
        lambda stem, hex_: f"{stem}_{hex_}",
        st.text(alphabet="ab.", max_size=2),
        st.text(alphabet="0123456789abcdef", min_size=5, max_size=7),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.tuples(st.sampled_from(["a", "a__b", "s"]), prompt_names), max_size=12),
    naming=st.builds(
        NamingConfig,
        template=st.sampled_from(["mcp__{alias}__{tool}", "{tool}"]),
        max_length=st.integers(16, 40),
    ),
)
def test_property_prompts_are_named_as_tools_of_the_same_names_are(
    keys: list[tuple[str, str]], naming: NamingConfig
) -> None:
    table = ToolTable(naming)
    for alias in {alias for alias, _ in keys}:
        table.update(alias, [mcp.Tool(name=n) for a, n in keys if a == alias])
    assert assign(naming, keys) == {(e.alias, e.name): e.local for e in table.entries()}


def test_a_name_two_servers_spell_alike_is_hashed_for_both_in_any_order() -> None:
    naming = NamingConfig()
    keys = [("gh__prod", "merge_pr"), ("gh", "prod__merge.pr")]
    first, second = assign(naming, keys), assign(naming, reversed(keys))
    assert first == second
    assert all(name.startswith("mcp__gh__prod__merge_pr_") for name in first.values())


def test_a_name_of_mcpds_own_tools_is_hashed() -> None:
    """Under a template that gives a prompt or a profile's tool a meta-tool's name as it
    is, that name stays mcpd's: the key gets a hashed one."""
    naming = NamingConfig(template="{tool}")
    keys = [("ev", "mcpd_search_tools"), ("ev", "mcpd.call.tool"), ("ev", "merge_pr")]
    got = assign(naming, keys)
    assert got == {
        ("ev", "mcpd_search_tools"): hashed_name(
            "mcpd_search_tools", "ev", "mcpd_search_tools", 64
        ),
        ("ev", "mcpd.call.tool"): hashed_name("mcpd_call_tool", "ev", "mcpd.call.tool", 64),
        ("ev", "merge_pr"): "merge_pr",
    }


def test_a_name_that_reads_as_one_of_mcpds_own_tools_is_hashed_too() -> None:
    naming = NamingConfig(template="{tool}")
    keys = [("ev", "MCPD_Search_Tools"), ("ev", "mcpd-call-tool"), ("ev", "mcpd_call_tools")]
    got = assign(naming, keys)
    assert got == {
        ("ev", "MCPD_Search_Tools"): hashed_name(
            "MCPD_Search_Tools", "ev", "MCPD_Search_Tools", 64
        ),
        ("ev", "mcpd-call-tool"): hashed_name("mcpd-call-tool", "ev", "mcpd-call-tool", 64),
        ("ev", "mcpd_call_tools"): "mcpd_call_tools",
    }
