"""URIs inside results, rewritten for the agent, and the text budget on reads (no I/O):
what MCP says servers send, and what a server may send instead."""

from __future__ import annotations

import json

import msgspec
import pytest

from mcpd.agents.calls.rewrite import prompt_result, read_result, tool_result


def raw(obj: object) -> msgspec.Raw:
    return msgspec.Raw(json.dumps(obj).encode())


def to_agent(uri: str) -> str:
    return uri if uri.startswith("demo://") else f"mcpd://a/{uri}"


def test_a_result_without_resources_is_the_servers_own_bytes() -> None:
    result = raw({"content": [{"type": "text", "text": 'mentions "resource" in text'}]})
    assert tool_result(result, to_agent) is result
    kept = raw({"content": [{"type": "resource_link", "uri": "demo://x", "name": "x"}]})
    assert tool_result(kept, to_agent) is kept  # nothing to change: still untouched


def test_links_and_embedded_resources_in_tool_results_and_prompts_are_rewritten() -> None:
    result = raw(
        {
            "content": [
                {"type": "resource_link", "uri": "file:///README.md", "name": "README"},
                {"type": "resource", "resource": {"uri": "file:///a", "blob": "AAEC"}},
            ],
            "structuredContent": {"uri": "file:///README.md"},
        }
    )
    out = tool_result(result, to_agent)
    assert isinstance(out, dict)
    assert out["content"][0]["uri"] == "mcpd://a/file:///README.md"
    assert out["content"][1]["resource"] == {"uri": "mcpd://a/file:///a", "blob": "AAEC"}
    # The tool's own data, as the server wrote it.
    assert bytes(out["structuredContent"]) == b'{"uri": "file:///README.md"}'
    prompt = raw(
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "see"}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///a"}}},
            ]
        }
    )
    got = prompt_result(prompt, to_agent, "a")
    assert isinstance(got, dict)
    assert got["messages"][1]["content"]["resource"]["uri"] == "mcpd://a/file:///a"


def test_a_result_whose_links_are_rewritten_keeps_its_other_members_bytes() -> None:
    link = b'{"type":"resource_link","uri":"file:///a","name":"a"}'
    rest = b'"structuredContent":{"c":1e400,"x":1.0000000000000000000001,"z":-0}'
    out = tool_result(msgspec.Raw(b'{"content":[' + link + b"]," + rest + b"}"), to_agent)
    assert isinstance(out, dict) and out["content"][0]["uri"] == "mcpd://a/file:///a"
    assert rest in msgspec.json.encode(out)


def test_a_content_that_cannot_be_read_is_not_passed_on_unrewritten() -> None:
    link = b'{"type":"resource_link","uri":"file:///a","name":"a","_meta":{"n":1e400}}'
    with pytest.raises(msgspec.DecodeError, match="out of range"):
        tool_result(msgspec.Raw(b'{"content":[' + link + b"]}"), to_agent)


def test_a_reads_text_is_cut_to_the_budget_and_blobs_pass_untouched() -> None:
    blob = "QUJD" * 500
    result = raw(
        {
            "contents": [
                {"uri": "demo://t", "text": "x" * 150},
                {"uri": "demo://b", "blob": blob, "mimeType": "application/octet-stream"},
                {"uri": "demo://t2", "text": "y" * 100},
            ]
        }
    )
    out = read_result(result, to_agent, 200)
    assert isinstance(out, dict)
    first, binary, last = out["contents"]
    assert first["text"] == "x" * 150
    assert binary["blob"] == blob
    assert last["text"].startswith("y" * 50 + "\n[mcpd: 50 more characters were cut here")
    assert out["_meta"]["mcpd/truncated"] == {"characters": 250, "budget": 200}
    small = raw({"contents": [{"uri": "demo://t", "text": "short"}]})
    assert read_result(small, to_agent, 200) is small


# -- what servers may send in place of what MCP says --


def test_a_result_that_only_names_a_resource_kind_in_passing_is_passed_on() -> None:
    for result in (
        raw(["resource_link", "resource"]),
        raw({"content": "resource_link"}),
        raw({"content": [1, None, "resource", {"type": "resource_link", "uri": 7}]}),
        raw({"content": [{"type": "resource", "resource": "file:///a"}]}),
        raw({"content": [{"type": "resource", "resource": {"uri": ["file:///a"]}}]}),
    ):
        assert tool_result(result, to_agent) is result


def test_a_single_content_block_is_rewritten_too() -> None:
    result = raw({"content": {"type": "resource_link", "uri": "file:///a", "name": "a"}})
    out = tool_result(result, to_agent)
    assert isinstance(out, dict) and out["content"]["uri"] == "mcpd://a/file:///a"


def test_a_decoded_result_is_rewritten_in_place() -> None:
    result = {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}
    assert tool_result(result, to_agent) is result
    assert result["content"][0]["uri"] == "mcpd://a/file:///a"


def test_an_embedded_resource_is_copied_not_changed_under_its_sender() -> None:
    inner = {"uri": "file:///a", "text": "t"}
    result = {"content": [{"type": "resource", "resource": inner}]}
    tool_result(result, to_agent)
    assert inner == {"uri": "file:///a", "text": "t"}


def test_prompt_messages_of_the_wrong_shape_are_passed_on() -> None:
    for result in (
        raw({"messages": {"content": {"type": "resource_link", "uri": "file:///a"}}}),
        raw({"messages": ["resource", 3]}),
        raw(["resource"]),
    ):
        assert prompt_result(result, to_agent, "a") is result


def test_a_read_whose_contents_are_not_a_list_is_passed_on() -> None:
    for result in (raw({"contents": "resource"}), raw([1]), raw({"contents": {"uri": "x"}})):
        assert read_result(result, to_agent, 10) is result


def test_a_reads_uris_are_rewritten_and_odd_items_skipped() -> None:
    result = raw({"contents": [{"uri": "file:///a", "text": "t"}, 5, {"uri": 9, "text": "u"}]})
    out = read_result(result, to_agent, 100)
    assert isinstance(out, dict)
    assert out["contents"] == [
        {"uri": "mcpd://a/file:///a", "text": "t"},
        5,
        {"uri": 9, "text": "u"},
    ]


def test_texts_past_the_budget_are_emptied_and_the_last_says_how_much() -> None:
    result = raw(
        {"contents": [{"uri": "demo://a", "text": "a" * 8}, {"uri": "demo://b", "text": "b" * 8}]}
    )
    out = read_result(result, to_agent, 5)
    assert isinstance(out, dict)
    first, second = out["contents"]
    assert first["text"] == "aaaaa"
    assert second["text"] == (
        "\n[mcpd: 11 more characters were cut here; this resource is 16 characters and "
        "the budget is 5.]"
    )


def test_a_budget_note_is_not_forced_into_a_meta_of_the_wrong_kind() -> None:
    result = raw({"contents": [{"uri": "demo://a", "text": "a" * 8}], "_meta": "mine"})
    out = read_result(result, to_agent, 4)
    assert isinstance(out, dict)
    assert out["_meta"] == "mine"
    assert out["contents"][0]["text"].startswith("aaaa\n[mcpd: 4 more characters")


@pytest.mark.parametrize("odd", [None, 5, ["t"]])
def test_a_last_text_that_is_not_a_string_does_not_break_the_read(odd: object) -> None:
    # A hostile server's contents: a long text, then an item whose "text" is no text.
    result = raw(
        {"contents": [{"uri": "demo://a", "text": "a" * 50}, {"uri": "demo://b", "text": odd}]}
    )
    out = read_result(result, to_agent, 10)
    assert isinstance(out, dict)
    first, second = out["contents"]
    assert first["text"].startswith("a" * 10 + "\n[mcpd: 40 more characters were cut here")
    assert second["text"] == odd
