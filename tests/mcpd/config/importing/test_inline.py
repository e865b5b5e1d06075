"""Secrets written inside an imported server's arguments or URL: each literal one is
found exactly where it is, with the variable that will carry it and a place of its
own; a reference is only warned of."""

from __future__ import annotations

from typing import Any

from mcpd.config.importing.inline import Inline, inline_secrets

TOKEN = "sk-abc123def456ghi789jkl012"


class Vars:
    """The importer's side: the variable each secret gets, and what it was given."""

    def __init__(self) -> None:
        self.given: list[tuple[str, str]] = []

    def __call__(self, name: str, secret: str) -> str:
        self.given.append((name, secret))
        return f"S_{name.upper()}_{len(self.given)}"


def found(table: dict[str, Any]) -> tuple[list[Inline], list[str], Vars]:
    names = Vars()
    inline, warnings = inline_secrets("notes", table, names)
    return inline, warnings, names


def secret(i: Inline, table: dict[str, Any]) -> str:
    return i.value_in(table)[i.start : i.end]


def test_an_options_value_is_found_whole_in_its_argument() -> None:
    table = {"command": "npx", "args": ["-y", "srv", "--api-key", TOKEN]}
    [i], [warning], names = found(table)
    assert (i.where, i.alias, i.index, i.var) == (
        ("servers", "notes", "args[3]"),
        "notes",
        3,
        "S_API_KEY_1",
    )
    assert secret(i, table) == TOKEN and names.given == [("api_key", TOKEN)]
    assert warning.startswith("servers.notes.args[3]: the value of --api-key")
    assert TOKEN not in warning


def test_a_secret_inside_an_argument_is_cut_out_of_it_exactly() -> None:
    table = {"command": "npx", "args": ["--token=abc1234567890"]}
    [i], _, _ = found(table)
    assert (i.start, i.end) == (len("--token="), len("--token=abc1234567890"))
    assert secret(i, table) == "abc1234567890"


def test_a_dollar_the_config_escapes_is_the_secrets_own() -> None:
    table = {"command": "npx", "args": ["--token=ab$$cd1234567890"]}
    [i], _, names = found(table)
    assert secret(i, table) == "ab$$cd1234567890"  # as it stands in mcpd's syntax
    assert names.given == [("token", "ab$cd1234567890")]  # as the server gets it


def test_a_reference_is_warned_of_but_hides_nothing_to_move() -> None:
    for arg in ("--token=${TOKEN}", "--token=${file:/run/secrets/t}", "--token=x$${Y}${Z}"):
        inline, [warning], names = found({"command": "npx", "args": [arg]})
        assert inline == [] and names.given == []
        assert "servers.notes.args[0]" in warning


def test_the_secrets_of_a_url_are_told_apart_by_name() -> None:
    url = "https://me:hunter2@example.com/mcp?token=aaa111&token=bbb222&api_key=zzz123"
    table = {"url": url}
    inline, warnings, _ = found(table)
    assert [(i.where, i.index, secret(i, table)) for i in inline] == [
        (("servers", "notes", "url", "password"), None, "hunter2"),
        (("servers", "notes", "url", "token"), None, "aaa111"),
        (("servers", "notes", "url", "token_2"), None, "bbb222"),
        (("servers", "notes", "url", "api_key"), None, "zzz123"),
    ]
    assert len(warnings) == 4 and not any("hunter2" in w for w in warnings)
    assert len({i.var for i in inline}) == 4


def test_two_secrets_in_one_argument_each_have_a_place_of_their_own() -> None:
    script = "psql postgres://a:p1@h/db && psql postgres://b:p2@h/db"
    table = {"command": "sh", "args": ["-c", script]}
    inline, _, _ = found(table)
    assert [(i.where, secret(i, table)) for i in inline] == [
        (("servers", "notes", "args[1]", "password"), "p1"),
        (("servers", "notes", "args[1]", "password_2"), "p2"),
    ]
    # One secret per argument needs no name of its own.
    table = {"command": "psql", "args": ["postgres://u:p4ss@h/db", "--token=abc1234567890"]}
    assert [i.where for i in found(table)[0]] == [
        ("servers", "notes", "args[0]"),
        ("servers", "notes", "args[1]"),
    ]


def test_a_server_with_nothing_in_its_arguments_or_url_has_nothing_to_move() -> None:
    for table in (
        {"command": "npx", "args": ["-y", "@scope/server", "--port", "8080"]},
        {"url": "https://example.com/mcp?page=2"},
        {"command": "srv"},
        {},
    ):
        assert found(table)[:2] == ([], [])
