"""Tool search: terms, ranking, filters, and the meta-tools' definitions and results."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import jsonschema
import msgspec
import pytest

from mcpd.agents.lists import metatools
from mcpd.agents.lists.metatools import ArgumentError
from mcpd.registry.profiles.search import ToolDoc, ToolIndex, stem, terms, words
from protocol.mcp import core as mcp

NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def doc(server: str, tool: str, description: str = "", **schema_props: Any) -> ToolDoc:
    props = {k: ({"type": "string", "description": v} if v else {"type": "string"})
             for k, v in schema_props.items()}  # fmt: skip
    return ToolDoc(
        name=f"mcp__{server}__{tool}",
        server=server,
        original=tool,
        description=description,
        input_schema={"type": "object", "properties": props},
    )


TOOLS = [
    doc("fs", "list_directory", "Get a listing of the entries in a folder.", path="Where"),
    doc("fs", "read_text_file", "Read the contents of a text file.", path=""),
    doc("fs", "write_file", "Write content to a file, replacing it.", path="", content=""),
    doc("fs", "delete_file", "Delete one file.", path=""),
    doc("fs", "move_file", "Move or rename a file.", source="", destination=""),
    doc("git", "git_status", "Shows the working tree status", repo_path=""),
    doc("git", "git_log", "Shows the commit logs", repo_path="", max_count="How many"),
    doc("git", "git_commit", "Records changes to the repository", message="Commit message"),
    doc("tickets", "create_ticket", "Open a new ticket and return its id.", title="", body=""),
    doc("tickets", "search", "Search tickets by words in their title or body.", query=""),
    doc("clock", "getCurrentTime", "The time now in a timezone.", timezone="IANA name"),
]
INDEX = ToolIndex(TOOLS)


def top(query: str, k: int = 3, **kw: Any) -> list[str]:
    return [h.name for h in INDEX.search(query, k, **kw)]


# -- terms --


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("list_directory_with_sizes", ["list", "directory", "siz"]),
        ("get-tiny-image", ["get", "tiny", "imag"]),
        ("getTinyImage", ["get", "tiny", "imag"]),
        ("HTTPServer.startNow", ["http", "server", "start", "now"]),
        ("files.read_all", ["fil", "read"]),  # "all" is a stop word
        ("parse URLs and IDs", ["pars", "url", "id"]),
        ("sha256 of a file", ["sha", "256", "fil"]),
        ("Café au lait", ["café", "au", "lait"]),
    ],
)
def test_terms_split_names_and_prose(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_words_keep_stop_words_and_case_folds() -> None:
    assert words("Show ALL the_Files") == ["show", "all", "the", "files"]


@pytest.mark.parametrize(
    "group",
    [
        ("list", "lists", "listing", "listed"),
        ("create", "created", "creates", "creating", "creation"),
        ("directory", "directories"),
        ("change", "changes", "changed", "changing"),
        ("commit", "commits", "committed", "committing"),
        ("add", "adding", "added", "adds"),
        ("search", "searches", "searched", "searching"),
        ("entity", "entities"),
    ],
)
def test_stemmer_joins_inflections(group: tuple[str, ...]) -> None:
    assert len({stem(w) for w in group}) == 1, {w: stem(w) for w in group}


@pytest.mark.parametrize("word", ["status", "string", "thing", "bus", "analysis", "class"])
def test_stemmer_leaves_words_that_only_look_inflected(word: str) -> None:
    assert stem(word) == word


# -- ranking --


def test_listing_files_finds_list_directory() -> None:
    assert top("listing files", 1) == ["mcp__fs__list_directory"]


def test_name_beats_description() -> None:
    # "commit" is git_commit's name and only a word in git_log's description.
    assert top("commit")[:2] == ["mcp__git__git_commit", "mcp__git__git_log"]


def test_a_word_in_the_name_outweighs_it_twice_in_a_description() -> None:
    index = ToolIndex(
        [
            doc("a", "commit_work", "Records the work."),
            doc("a", "log", "Shows each commit with its commit message and more."),
        ]
    )
    assert [h.name for h in index.search("commit", 2)] == ["mcp__a__commit_work", "mcp__a__log"]


def test_every_query_word_counts() -> None:
    # Both tools are about files; only one is about writing.
    assert top("write a file", 1) == ["mcp__fs__write_file"]
    assert top("read a file", 1) == ["mcp__fs__read_text_file"]


def test_synonyms_match_but_below_the_word_itself() -> None:
    # "remove" is delete_file's synonym; "folder" is in list_directory's description.
    assert top("remove", 1) == ["mcp__fs__delete_file"]
    assert top("erase a file", 1) == ["mcp__fs__delete_file"]
    assert set(top("document", 5)) == {
        f"mcp__fs__{t}_file" for t in ("read_text", "write", "delete", "move")
    }
    index = ToolIndex([doc("a", "remove_item", "Remove."), doc("a", "delete_item", "Delete.")])
    assert [h.name for h in index.search("remove item", 2)] == [
        "mcp__a__remove_item",
        "mcp__a__delete_item",
    ]


def test_argument_descriptions_count_for_little_but_count() -> None:
    # "IANA" appears only in getCurrentTime's argument description.
    assert top("IANA", 1) == ["mcp__clock__getCurrentTime"]
    assert top("what time is it", 1) == ["mcp__clock__getCurrentTime"]


def test_prefixes_match_abbreviations_both_ways() -> None:
    index = ToolIndex(
        [
            doc("a", "show_environment", "All variables."),
            doc("a", "make_dir", "A new one."),
            doc("a", "other", "Something else."),
        ]
    )
    assert [h.name for h in index.search("env", 3)] == ["mcp__a__show_environment"]
    assert [h.name for h in index.search("directories", 3)] == ["mcp__a__make_dir"]


def test_server_alias_finds_its_tools() -> None:
    hits = top("git", 5)
    assert hits[:3] and all(h.startswith("mcp__git__") for h in hits[:3])
    assert set(top("tickets", 2)) == {"mcp__tickets__create_ticket", "mcp__tickets__search"}
    assert top("clock") == ["mcp__clock__getCurrentTime"]  # the alias is its only mention


def test_exact_name_ranks_first() -> None:
    assert top("mcp__tickets__search", 1) == ["mcp__tickets__search"]
    assert top("write_file", 1) == ["mcp__fs__write_file"]


def test_allowed_set_filters_and_k_limits() -> None:
    allowed = {"mcp__fs__read_text_file", "mcp__git__git_log"}
    assert top("file", 10, allowed=allowed) == ["mcp__fs__read_text_file"]
    assert top("git commit log", 10, allowed=set()) == []
    assert len(top("file", 2)) == 2
    assert INDEX.search("file", 0) == []


def test_nothing_to_search_for_returns_nothing() -> None:
    assert INDEX.search("", 5) == []
    assert INDEX.search("what is it to be", 5) == []  # stop words only
    assert INDEX.search("xyzzy", 5) == []


def test_hits_carry_server_score_and_first_sentence() -> None:
    hit = INDEX.search("ticket id", 1)[0]
    assert (hit.name, hit.server) == ("mcp__tickets__create_ticket", "tickets")
    assert hit.summary == "Open a new ticket and return its id."
    assert hit.score > 0
    long = ToolIndex([doc("a", "b", "First part. " + "x" * 300)]).search("b", 1)[0]
    assert long.summary == "First part."


def test_ties_break_by_name_and_input_order_does_not_matter() -> None:
    same = [doc("s", f"tool_{c}", "Does the thing.") for c in "dbca"]
    index = ToolIndex(same)
    hits = index.search("thing", 4)
    assert len({h.score for h in hits}) == 1
    assert [h.name for h in hits] == [f"mcp__s__tool_{c}" for c in "abcd"]
    shuffled = TOOLS[:]
    random.Random(3).shuffle(shuffled)
    for query in ("file", "git", "show the commit history", "ticket"):
        assert ToolIndex(shuffled).search(query, 20) == INDEX.search(query, 20)


def test_get_looks_up_by_local_and_original_name() -> None:
    found = INDEX.get("mcp__git__git_log")
    assert found is not None and found.original == "git_log"
    assert INDEX.get("nope") is None
    assert len(INDEX) == len(TOOLS)


# -- the meta-tools --


def definitions() -> list[dict[str, Any]]:
    tools = metatools.meta_tools(["git", "tickets"], total=56)
    out: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(tools))
    return out


def test_meta_tool_definitions_are_valid_tools() -> None:
    defs = definitions()
    assert [d["name"] for d in defs] == list(metatools.NAMES)
    for d in defs:
        # Within 64 characters also behind a host's prefix such as "mcp__mcpd__".
        assert NAME_RULE.match("mcp__mcpd__" + d["name"]), d["name"]
        assert d["description"] and d["title"]
        for key in ("inputSchema", "outputSchema"):
            if key not in d:
                continue
            schema = d[key]
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object"
            assert set(schema["required"]) <= set(schema["properties"])
        assert set(d["annotations"]) == {
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        }
    search, describe, call = defs
    assert search["inputSchema"]["required"] == ["query"]
    assert describe["inputSchema"]["required"] == ["names"]
    assert call["inputSchema"]["required"] == ["name"]
    assert search["annotations"]["readOnlyHint"] and describe["annotations"]["readOnlyHint"]
    assert call["annotations"]["destructiveHint"] and "outputSchema" not in call
    assert "56 tools from: git, tickets" in search["description"]


def _structured(result: mcp.CallToolResult) -> Any:
    return msgspec.json.decode(msgspec.json.encode(result))


def test_search_result_shows_outages_like_the_full_list() -> None:
    hits = INDEX.search("ticket", 2)
    marker = "unavailable: tickets is down since 19:09:42, retrying at 19:09:44"
    out = _structured(
        metatools.search_result("ticket", hits, total=11, markers={"tickets": marker})
    )
    schema = definitions()[0]["outputSchema"]
    jsonschema.validate(out["structuredContent"], schema)
    tools = out["structuredContent"]["tools"]
    assert [t["name"] for t in tools] == [h.name for h in hits]
    for t in tools:
        assert t["available"] is False and t["unavailable"] == marker
        assert t["description"].startswith(f"[{marker}] [tickets] ")
    text = out["content"][0]["text"]
    assert out["content"][0]["type"] == "text" and "isError" not in out
    assert text.count(marker) == 2 and "mcpd_describe_tools" in text

    up = _structured(metatools.search_result("ticket", hits, total=11))
    for t in up["structuredContent"]["tools"]:
        assert t["available"] is True and "unavailable" not in t
        assert t["description"].startswith("[tickets] ")
    assert "unavailable" not in up["content"][0]["text"]


def test_search_result_with_no_hits_says_what_to_try() -> None:
    out = _structured(metatools.search_result("xyzzy", [], total=11))
    assert out["structuredContent"] == {"query": "xyzzy", "total": 11, "tools": []}
    assert "No tool matches" in out["content"][0]["text"] and "isError" not in out


def test_describe_result_gives_full_definitions_and_names_unknown_ones() -> None:
    listed = {
        "name": "mcp__git__git_log",
        "description": "[unavailable: git is down] [git] Shows the commit logs",
        "inputSchema": {"type": "object", "properties": {"max_count": {"type": "integer"}}},
        "annotations": {"readOnlyHint": False},
        "_meta": {"mcpd/server": "git", "mcpd/available": False},
    }
    out = _structured(metatools.describe_result([listed], ["mcp__git__nope"]))
    body = out["structuredContent"]
    jsonschema.validate(body, definitions()[1]["outputSchema"])
    assert body["unknown"] == ["mcp__git__nope"]
    (tool,) = body["tools"]
    assert tool["inputSchema"] == listed["inputSchema"]
    assert tool["description"] == listed["description"]
    assert (tool["server"], tool["available"]) == ("git", False)
    assert "_meta" not in tool and "isError" not in out
    assert json.loads(out["content"][0]["text"].split("\n")[0]) == body
    assert _structured(metatools.describe_result([], ["x"]))["isError"] is True


def test_arguments_are_read_leniently_and_refused_clearly() -> None:
    assert metatools.parse_search({"query": "x"}) == metatools.SearchArgs("x", 8)
    assert metatools.parse_search(b'{"query": "x", "limit": 500, "extra": 1}').limit == 50
    assert metatools.parse_search({"query": "x", "limit": 0}).limit == 1
    assert metatools.parse_describe({"names": "a"}) == ["a"]
    assert metatools.parse_describe(msgspec.Raw(b'{"names": ["a", "b", "a"]}')) == ["a", "b"]
    assert metatools.parse_call({"name": "t"}) == ("t", {})
    assert metatools.parse_call({"name": "t", "arguments": '{"a": 1}'}) == ("t", {"a": 1})
    assert metatools.parse_call({"name": "t", "arguments": {"a": [1]}}) == ("t", {"a": [1]})
    refused = [
        (metatools.parse_search, {}, "query"),
        (metatools.parse_search, {"query": "  "}, "empty"),
        (metatools.parse_search, {"query": 3}, "str"),
        (metatools.parse_describe, {"names": []}, "empty"),
        (metatools.parse_describe, {"names": [f"t{i}" for i in range(21)]}, "at most 20"),
        (metatools.parse_call, {"name": "mcpd_call_tool"}, "directly"),
        (metatools.parse_call, {"name": "t", "arguments": "[1]"}, "object"),
        (metatools.parse_call, b"not json", "mcpd_call_tool"),
    ]
    for parse, args, words_in_error in refused:
        with pytest.raises(ArgumentError, match=words_in_error):
            parse(args)  # type: ignore[operator]
    err = _structured(metatools.error_result("mcpd_search_tools: 'query' is empty"))
    assert err["isError"] is True and "query" in err["content"][0]["text"]
