"""A profile's patterns: over names, where a server is named only before the first
slash, deny wins and case counts; over URIs, every spelling a server may read as the
same resource is held to them."""

from __future__ import annotations

import pytest

from mcpd.config.tables.profiles import Patterns
from mcpd.registry.profiles.filters import NameFilter, UriFilter
from tests.support.uris.spellings import DENIED, DENIED_FOLDER, RESPELLED


def test_a_pattern_names_a_server_only_before_its_first_slash() -> None:
    rule = NameFilter(Patterns(allow=["git/log*"], deny=["*/log_secret"]))
    assert rule.admits("git", "log")
    assert not rule.admits("fs", "log")
    assert not rule.admits("git", "log_secret")
    # A server's tool named like another server's pattern is not that server's.
    assert not rule.admits("evil", "git/log")


def test_a_uri_pattern_is_not_read_as_a_server_and_a_pattern() -> None:
    rule = NameFilter(Patterns(allow=["file:///srv/*"]))
    assert rule.admits("fs", "file:///srv/a/b.txt")
    assert not rule.admits("fs", "file:///etc/passwd")
    assert not rule.admits("file:", "//srv/x")


@pytest.mark.parametrize(
    "uri",
    ["res://s1/c#", "res://s1/c?", "RES://s1/c", "res://s1/./c", "res://s1//c",
     "res://s1/%63", "res://s1/t/../c", " res://s1/c", "res://s1/c?x=1",
     # A server that decodes before it splits reads these as c with a query.
     "res://s1/c%3fx=1", "res://s1/c%23top"],
)  # fmt: skip
def test_a_denied_resource_is_denied_however_its_uri_is_spelled(uri: str) -> None:
    rule = UriFilter(Patterns(deny=["s1/res://s1/c"]))
    assert not rule.admits_uri("s1", uri)
    assert rule.admits_uri("s1", "res://s1/cc")


def test_a_denied_folder_is_denied_through_dots_escapes_and_backslashes() -> None:
    rule = UriFilter(Patterns(deny=[f"fs/{DENIED_FOLDER}"]))
    for uri in (DENIED, *RESPELLED):
        assert not rule.admits_uri("fs", uri), uri
    assert rule.admits_uri("fs", "file:///home/u/notes.txt")


def test_an_allowed_folder_lets_in_nothing_outside_it_however_spelled() -> None:
    rule = UriFilter(Patterns(allow=["fs/file:///srv/*"]))
    assert rule.admits_uri("fs", "file:///srv/a/b.txt")
    assert rule.admits_uri("fs", "file:///srv/a%20b.txt")
    assert not rule.admits_uri("fs", "file:///srv/../etc/passwd")
    assert not rule.admits_uri("fs", "file:///srv/a%2F..%2F..%2Fetc/passwd")
    # Node and Python read these as /outside and /etc/passwd.
    assert not rule.admits_uri("fs", "file:///srv/x%3f/../../outside")
    assert not rule.admits_uri("fs", "file:///srv/x%23/../../outside")
    assert not rule.admits_uri("fs", "file://localhost/srv/../etc/passwd")
    assert not rule.admits_uri("fs", "file:/srv/../etc/passwd")
    # A server that decodes before it splits reads this as /.
    assert not rule.admits_uri("fs", "file:///srv/..%3f")
    # What the folder holds stays in however spelled, where a pattern would match the
    # spelling as written too.
    assert rule.admits_uri("fs", "file:///srv/x%3f/../a.txt")
    localhost = UriFilter(Patterns(allow=["fs/file://localhost/srv/*"]))
    assert localhost.admits_uri("fs", "file:///srv/a.txt")
    assert not localhost.admits_uri("fs", "file://localhost/srv/x%3f/../../outside")
    # A pattern written with escapes matches what it names, and what names it.
    escaped = UriFilter(Patterns(allow=["fs/file:///My%20Docs/*"]))
    assert escaped.admits_uri("fs", "file:///My%20Docs/a.txt")
    assert escaped.admits_uri("fs", "file:///My Docs/a.txt")


@pytest.mark.parametrize(
    "pattern", ["fs/file:///srv/secret/*", "fs/FILE://localhost/srv/secret/*", "fs//srv/secret/*"]
)
def test_a_denied_path_is_denied_under_any_scheme_or_none(pattern: str) -> None:
    """A server that reads a URI by its path alone opens the file for each of these."""
    rule = UriFilter(Patterns(deny=[pattern]))
    for uri in (
        "file:///srv/secret/key.txt",
        "/srv/secret/key.txt",
        "//srv//secret/key.txt",
        "/srv/pub/../secret/key.txt",
        "/srv/secret/key.txt?v=1",
        "x:///srv/secret/key.txt",
        "mcpd:/srv/secret/key.txt",
        "https://example.com/srv/secret/key.txt",
        "x:///srv/secret%2Fkey.txt",
        "x://srv/secret/key.txt",
    ):
        assert not rule.admits_uri("fs", uri), uri
    for uri in ("/srv/pub/readme.txt", "x:///srv/pub/readme.txt", "notes://srv/pub"):
        assert rule.admits_uri("fs", uri), uri
    # Another server's files are not the pattern's.
    assert rule.admits_uri("docs", "/srv/secret/key.txt")


def test_a_denied_name_is_denied_with_params_after_it() -> None:
    """Python's ``urlparse`` drops ``;x`` from a path's last segment, for a URI with
    no scheme and for http(s)."""
    rule = UriFilter(Patterns(deny=["fs/file:///srv/secret/key.txt", "fs//srv/*.pem"]))
    for uri in (
        "/srv/secret/key.txt;x",
        "https://example.com/srv/secret/key.txt;x",
        "/srv/secret/id.pem;.txt",
        "x:///srv/secret/id.pem;x?q",
        "/srv/secret;v=1/key.txt",
    ):
        assert not rule.admits_uri("fs", uri), uri
    assert rule.admits_uri("fs", "/srv/secret/key.txt.bak;x")


def test_a_path_deny_refuses_a_relative_path_that_climbs() -> None:
    """From the server's working directory, enough ``..`` reach the denied file and
    fewer may too; a path that stays below that directory is its own."""
    rule = UriFilter(Patterns(deny=["fs/file:///srv/secret/*"]))
    for uri in ("../" * 12 + "srv/secret/key.txt", "../pub/readme.txt", "x:../a", "mcpd:a/../../b"):
        assert not rule.admits_uri("fs", uri), uri
    for uri in ("srv/secret/key.txt", "notes/a/../b.txt", "x:..a"):
        assert rule.admits_uri("fs", uri), uri
    # Another server's deny, or a deny that names no path, refuses nothing that climbs.
    assert rule.admits_uri("docs", "../srv/secret/key.txt")
    assert UriFilter(Patterns(deny=["fs/notes://*"])).admits_uri("fs", "../x")


def test_a_path_deny_reaches_every_scheme() -> None:
    """A deny of every file of a server refuses every URI of it that has an absolute
    path, its authority read as the path's first folder."""
    rule = UriFilter(Patterns(deny=["fs/file:///*"]))
    for uri in ("https://example.com/index.html", "db://table/row", "mem:/x", "/x"):
        assert not rule.admits_uri("fs", uri), uri
    for uri in ("mem:x", "urn:isbn:0451450523", "db:"):
        assert rule.admits_uri("fs", uri), uri


def test_an_allowed_folder_lets_in_no_path_without_its_scheme() -> None:
    rule = UriFilter(Patterns(allow=["fs/file:///srv/pub/*"]))
    assert rule.admits_uri("fs", "file:///srv/pub/readme.txt")
    for uri in ("/srv/pub/readme.txt", "x:///srv/pub/readme.txt", "/srv/secret/key.txt"):
        assert not rule.admits_uri("fs", uri), uri


def test_deny_wins_over_allow_and_patterns_are_case_sensitive() -> None:
    rule = NameFilter(Patterns(allow=["*"], deny=["delete_*"]))
    assert not rule.admits("fs", "delete_file")
    assert rule.admits("fs", "Delete_file")
    assert NameFilter(Patterns()).everything


def test_a_name_pattern_holds_for_the_name_as_agents_know_it_too() -> None:
    """A server renaming ``drop_db`` to ``drop.db`` (agents know both as ``drop_db``)
    stays denied; an allow admits the server's own spelling only, so none of a listed
    name's look-alikes."""
    deny = NameFilter(Patterns(deny=["s/drop_db"]))
    assert not deny.admits("s", "drop.db") and not deny.admits("s", "drop db")
    assert deny.admits("s", "drop-db")
    allow = NameFilter(Patterns(allow=["s/read_*"]))
    assert allow.admits("s", "read_file") and not allow.admits("s", "read.file")
    assert not allow.admits("s", "write_file")
