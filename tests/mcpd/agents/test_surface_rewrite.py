"""URIs inside results, rewritten for the agent; the text budget on reads (no I/O)."""

from __future__ import annotations

import json

import msgspec

from mcpd.agents.rewrite import prompt_result, read_result, tool_result


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
    assert out["structuredContent"] == {"uri": "file:///README.md"}  # the tool's own data
    prompt = raw(
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "see"}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///a"}}},
            ]
        }
    )
    got = prompt_result(prompt, to_agent)
    assert isinstance(got, dict)
    assert got["messages"][1]["content"]["resource"]["uri"] == "mcpd://a/file:///a"


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
