"""Aliases that let one server's tools be named as another's are warned about (and
still accepted): an alias holding the template's separator, and an alias whose names
begin as another's do."""

from __future__ import annotations

from mcpd.config.checks.aliases import alias_warnings
from mcpd.config.tables.model import Config, NamingConfig
from mcpd.config.tables.profiles import ProfileConfig
from mcpd.config.tables.servertable import ServerConfig


def config(*aliases: str, template: str | None = None, **profiles: str) -> Config:
    return Config(
        servers={a: ServerConfig(command="srv") for a in aliases},
        naming=NamingConfig() if template is None else NamingConfig(template=template),
        profiles={name: ProfileConfig(template=t) for name, t in profiles.items()},
    )


def test_aliases_that_cannot_be_mistaken_give_no_warning() -> None:
    assert alias_warnings(config("gh", "notes", "tickets")) == []


def test_an_alias_holding_the_separator_is_warned_about() -> None:
    warnings = alias_warnings(config("gh__prod", "notes"))
    assert warnings == [
        "the alias 'gh__prod' holds '__', which the template 'mcp__{alias}__{tool}' writes "
        "between an alias and a tool: another server's tools may be named as gh__prod's "
        "are (pick an alias without it)"
    ]


def test_an_alias_whose_names_begin_as_anothers_is_warned_about() -> None:
    (warning,) = alias_warnings(config("gh", "gh-x", template="{alias}{tool}"))
    assert warning == (
        "under the template '{alias}{tool}', the names of gh's tools begin as those of "
        "gh-x's do ('gh'): a tool of gh may be named as one of gh-x is"
    )


def test_characters_a_name_cannot_hold_count_as_the_underscore_they_become() -> None:
    warnings = alias_warnings(config("a", "a_b", template="{alias}.{tool}"))
    assert len(warnings) == 1 and "the alias 'a_b' holds" not in warnings[0]
    assert "the names of a's tools begin as those of a_b's do ('a_')" in warnings[0]


def test_each_profiles_template_is_checked_too() -> None:
    assert alias_warnings(config("gh-x", template="{alias}__{tool}")) == []
    warnings = alias_warnings(config("gh-x", template="{alias}__{tool}", narrow="{alias}-{tool}"))
    assert warnings == [
        "the alias 'gh-x' holds '-', which the template '{alias}-{tool}' writes between an "
        "alias and a tool: another server's tools may be named as gh-x's are (pick an alias "
        "without it)"
    ]


def test_a_template_with_the_tool_before_the_alias_has_no_separator() -> None:
    assert alias_warnings(config("x_y", template="{tool}_{alias}")) == []
