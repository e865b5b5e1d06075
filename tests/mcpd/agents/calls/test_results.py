"""shape_call_result: what a tools/call result looks like by the time an agent sees it."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Raw

from mcpd.agents.calls.results import shape_call_result

COMPLETE_FIELD = b'"resultType":"complete"'


def shape(data: bytes, *, modern: bool = True, budget: int = 1000, alias: str = "notes") -> Any:
    return shape_call_result(Raw(data), modern=modern, budget=budget, alias=alias)[0]


def links(data: bytes, budget: int = 1000) -> bool:
    return shape_call_result(Raw(data), modern=True, budget=budget, alias="notes")[1]


def test_only_content_that_can_hold_a_uri_is_marked_for_rewriting() -> None:
    # The mark spares a text-only result a second scan; a missed mark would leave a
    # server's URI in front of the agent, which could not read it through mcpd.
    text = b'{"content":[{"type":"text","text":"\\"resource\\""},{"type":"image","data":""}]}'
    assert links(text) is False
    link = b'{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}'
    assert links(link) is True
    assert links(link, budget=0) is True
    embedded = b'{"content":[{"type":"text","text":"x"},{"type":"resource","resource":{}}]}'
    assert links(embedded) is True


def as_json(out: Any) -> dict[str, Any]:
    """The shaped result as the agent will decode it."""
    data = bytes(out) if isinstance(out, Raw) else msgspec.json.encode(out)
    decoded = json.loads(data)
    assert isinstance(decoded, dict)
    return decoded


def texts(result: dict[str, Any]) -> list[str]:
    return [b["text"] for b in result["content"] if b.get("type") == "text"]


def only_text(result: dict[str, Any]) -> str:
    (text,) = texts(result)
    return text


def body(*blocks: dict[str, Any], **fields: Any) -> bytes:
    return json.dumps({"content": list(blocks), **fields}).encode()


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


IMAGE = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
LINK = {"type": "resource_link", "uri": "file:///a.txt", "name": "a"}


# -- complete results --


def test_a_result_without_result_type_passes_byte_identical_to_a_legacy_agent() -> None:
    data = b'{"content" : [ {"type":"text","text":"caf\\u00e9"} ],  "isError":false }'
    out = shape(data, modern=False)
    assert isinstance(out, Raw)
    assert bytes(out) == data


def test_a_result_without_result_type_is_complete_for_a_modern_agent() -> None:
    data = b'{"content" : [ {"type":"text","text":"caf\\u00e9"} ],  "isError":false }'
    out = shape(data, modern=True)
    assert isinstance(out, Raw)
    # Spliced in: the server's own bytes follow unchanged.
    assert bytes(out) == b"{" + COMPLETE_FIELD + b"," + data[1:]
    decoded = as_json(out)
    assert decoded["resultType"] == "complete"
    assert decoded["content"] == [text("café")]
    assert decoded["isError"] is False


def test_leading_whitespace_before_the_result_object_is_handled() -> None:
    out = shape(b'  \n{"content":[]}', modern=True)
    assert bytes(out) == b"{" + COMPLETE_FIELD + b',"content":[]}'


@pytest.mark.parametrize(
    "data",
    [
        b"{}",
        b" {\t} ",
        b'{"content":null}',
        b'{"resultType":"complete","task":{"taskId":"x"}}',
        b'{"resultType":null,"structuredContent":{"n":1}}',
    ],
)
@pytest.mark.parametrize("modern", [True, False])
def test_a_result_with_no_content_is_the_servers_malformed_result(
    data: bytes, modern: bool
) -> None:
    # An agent's SDK that requires it would fail the call in words naming neither the
    # server nor what is wrong.
    out = as_json(shape(data, modern=modern))
    assert out["isError"] is True
    assert only_text(out).startswith("The tool server 'notes' returned a malformed result: ")
    assert "no content" in only_text(out)
    assert ("resultType" in out) is modern


def test_an_empty_content_is_content() -> None:
    out = shape(b' {\t"content" : [] } ', modern=True)
    assert as_json(out) == {"resultType": "complete", "content": []}


def test_a_complete_modern_result_passes_byte_identical_to_a_modern_agent() -> None:
    data = b'{"resultType":"complete","content":[{"type":"text","text":"ok"}],"_meta":{"k":1}}'
    out = shape(data, modern=True)
    assert isinstance(out, Raw)
    assert bytes(out) == data


def test_non_text_content_and_structured_content_pass_through() -> None:
    data = body(IMAGE, text("hi"), LINK, structuredContent={"n": [1, 2]})
    assert bytes(shape(data, modern=False)) == data


def test_a_tool_error_result_is_passed_on_as_it_is() -> None:
    data = body(text("it failed"), isError=True)
    assert bytes(shape(data, modern=False)) == data


# -- results that are not complete --


INPUT_REQUIRED = {
    "resultType": "input_required",
    "inputRequests": {
        "github_login": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "GitHub user?", "requestedSchema": {}},
        },
        "workspace": {"method": "roots/list", "params": {}},
    },
    "requestState": "opaque-state",
}


@pytest.mark.parametrize("modern", [True, False])
def test_input_required_is_never_delivered_as_complete(modern: bool) -> None:
    out = as_json(shape(json.dumps(INPUT_REQUIRED).encode(), modern=modern))
    assert out["isError"] is True
    assert out.get("resultType") == ("complete" if modern else None)
    assert "inputRequests" not in out
    assert "requestState" not in out
    message = only_text(out)
    assert "'notes'" in message
    assert "github_login" in message
    assert "elicitation/create" in message
    assert "GitHub user?" in message
    assert "workspace" in message
    assert "roots/list" in message
    assert out["_meta"]["mcpd/inputRequired"] == {
        "github_login": {"method": "elicitation/create"},
        "workspace": {"method": "roots/list"},
    }


URL_ASK = {
    "resultType": "input_required",
    "inputRequests": {
        "k": {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in", "url": "https://evil.example/x"},
        }
    },
    "requestState": "s1",
}


@pytest.mark.parametrize("declared", [{}, {"form": {}}])
def test_a_url_elicitation_is_an_error_for_an_agent_that_declared_form_mode_only(
    declared: dict[str, Any],
) -> None:
    data = json.dumps(URL_ASK).encode()

    def shaped(caps: dict[str, Any]) -> dict[str, Any]:
        out = shape_call_result(Raw(data), modern=True, budget=1000, alias="n", capabilities=caps)
        return as_json(out[0])

    result = shaped({"elicitation": declared})
    assert result["isError"] is True and "inputRequests" not in result
    # One that declared URL mode gets the request to answer.
    assert shaped({"elicitation": {"url": {}}}) == URL_ASK


def test_input_required_with_only_request_state_goes_to_any_modern_agent() -> None:
    # It asks nothing: retrying with the state needs no capability.
    data = b'{"resultType":"input_required","requestState":"shed load"}'
    assert as_json(shape(data)) == msgspec.json.decode(data)


def test_input_required_with_neither_requests_nor_state_is_an_error() -> None:
    out = as_json(shape(b'{"resultType":"input_required"}'))
    assert out["isError"] is True
    assert out["resultType"] == "complete"
    assert "more input" in only_text(out)


@pytest.mark.parametrize("kind", ["task", "partial", "COMPLETE", ""])
def test_an_unknown_result_type_is_an_error(kind: str) -> None:
    data = body(text("looks fine"), resultType=kind)
    out = as_json(shape(data))
    assert out["isError"] is True
    assert out["resultType"] == "complete"
    message = only_text(out)
    assert f'resultType "{kind}"' in message
    assert "'notes'" in message
    assert "looks fine" not in message


@pytest.mark.parametrize(
    "data",
    [
        b'{"content": "not a list"}',
        b'{"content": [{"type": "text", "text": 5}]}',
        b'{"content": [7]}',
        b'{"resultType": 3}',
        b"[]",
        b"null",
        b'"text"',
    ],
)
def test_a_malformed_result_becomes_an_error_naming_the_server(data: bytes) -> None:
    out = as_json(shape(data, alias="tickets"))
    assert out["isError"] is True
    assert "'tickets'" in only_text(out)
    assert "malformed" in only_text(out)


# -- the text budget --

NOTE_RE = re.compile(r"(\d+) more characters were cut")


def cut_count(result: dict[str, Any]) -> int:
    note = result["content"][-1]
    assert note["type"] == "text"
    m = NOTE_RE.search(note["text"])
    assert m is not None, note
    return int(m.group(1))


def out_text_sum(result: dict[str, Any]) -> int:
    """Characters of text the agent gets, leaving out mcpd's own note."""
    return sum(len(t) for t in texts(result)[:-1])


def test_text_over_the_budget_is_cut_to_exactly_the_budget_with_a_note() -> None:
    data = body(text("a" * 250))
    out = as_json(shape(data, budget=100))
    assert out["content"][0] == text("a" * 100)
    assert len(out["content"]) == 2
    assert cut_count(out) == 150
    assert "budget is 100" in out["content"][-1]["text"]


def test_the_budget_spans_blocks_and_later_text_blocks_are_dropped() -> None:
    data = body(text("a" * 60), text("b" * 60), text("c" * 60))
    out = as_json(shape(data, budget=100))
    assert texts(out)[:-1] == ["a" * 60, "b" * 40]
    assert cut_count(out) == 80


def test_non_text_blocks_are_kept_in_order_when_text_is_cut() -> None:
    data = body(text("a" * 80), IMAGE, text("b" * 80), LINK, text("c" * 10))
    out = as_json(shape(data, budget=100))
    content = out["content"]
    assert content[:4] == [text("a" * 80), IMAGE, text("b" * 20), LINK]
    assert len(content) == 5
    assert cut_count(out) == 70


def test_cutting_keeps_the_other_fields_and_marks_a_modern_result_complete() -> None:
    data = body(text("x" * 300), isError=True, structuredContent={"rows": 3}, _meta={"m": 1})
    modern = as_json(shape(data, budget=100, modern=True))
    assert modern["resultType"] == "complete"
    assert modern["isError"] is True
    assert modern["structuredContent"] == {"rows": 3}
    assert modern["_meta"] == {"m": 1}
    legacy = as_json(shape(data, budget=100, modern=False))
    assert "resultType" not in legacy


def embedded(s: str, uri: str = "file:///notes.md") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": "text/markdown", "text": s}}


def test_an_embedded_resources_text_counts_and_is_cut_like_a_text_block() -> None:
    data = body(text("a" * 60), embedded("b" * 5000), text("c" * 10))
    out = as_json(shape(data, budget=100, modern=False))
    first, resource, _ = out["content"]
    assert first == text("a" * 60)
    assert resource["resource"] == {
        "uri": "file:///notes.md",
        "mimeType": "text/markdown",
        "text": "b" * 40,
    }
    assert cut_count(out) == 5070 - 100


def test_structured_content_is_passed_on_whole_while_the_text_is_cut() -> None:
    # What FastMCP sends for a long string: the text, and the same as structured content
    # the host checks against the tool's outputSchema.
    long = "r" * 5000
    data = body(text(long), structuredContent={"result": long})
    out = as_json(shape(data, budget=1000, modern=False))
    assert out["structuredContent"] == {"result": long}
    assert out["content"][0] == text("r" * 1000) and cut_count(out) == 4000
    assert "isError" not in out


STRUCTURED = b'{"c":1e400,"x":1.0000000000000000000001,"z":-0,"e":1E2,"f":0.1e1}'
OUT_OF_RANGE = b'"structuredContent":' + STRUCTURED + b',"_meta":{"n":-0.0}'


@pytest.mark.parametrize("modern", [True, False])
def test_structured_content_and_meta_keep_their_bytes_when_the_text_is_cut(modern: bool) -> None:
    data = b'{"content":[{"type":"text","text":"' + b"a" * 300 + b'"}],' + OUT_OF_RANGE + b"}"
    out = msgspec.json.encode(shape(data, budget=100, modern=modern))
    assert b'"structuredContent":' + STRUCTURED in out and b'"_meta":{"n":-0.0}' in out
    assert as_json(Raw(out.replace(b"1e400", b"1")))["content"][0] == text("a" * 100)


def test_a_modern_result_whose_result_type_is_null_keeps_its_other_bytes() -> None:
    data = b'{"content":[{"type":"text","text":"a"}],"resultType":null,' + OUT_OF_RANGE + b"}"
    out = msgspec.json.encode(shape(data, modern=True))
    assert b'"structuredContent":' + STRUCTURED in out and b'"resultType":"complete"' in out


def test_a_number_no_double_holds_in_the_content_of_a_cut_result_is_the_servers_fault() -> None:
    data = b'{"content":[{"type":"text","text":"' + b"a" * 300 + b'","_meta":{"n":1e400}}]}'
    out = as_json(shape(data, budget=100, alias="tickets"))
    assert out["isError"] is True
    assert only_text(out).startswith("The tool server 'tickets' returned a malformed result")


def test_the_budget_counts_characters_not_bytes() -> None:
    within = body(text("é" * 100))  # 200 bytes of UTF-8, 100 characters
    assert bytes(shape(within, budget=100, modern=False)) == within
    over = as_json(shape(body(text("é" * 130)), budget=100))
    assert out_text_sum(over) == 100
    assert cut_count(over) == 30


def test_text_exactly_at_the_budget_passes_through_byte_identical() -> None:
    data = body(text("a" * 40), IMAGE, text("b" * 60))
    assert bytes(shape(data, budget=100, modern=False)) == data


@given(
    lengths=st.lists(st.integers(min_value=0, max_value=300), max_size=8),
    images=st.lists(st.booleans(), max_size=8),
    budget=st.integers(min_value=100, max_value=1000),
)
def test_property_text_is_cut_to_the_budget_and_nothing_else_is_lost(
    lengths: list[int], images: list[bool], budget: int
) -> None:
    blocks: list[dict[str, Any]] = []
    for i, n in enumerate(lengths):
        blocks.append(text(chr(ord("a") + i) * n))
        if i < len(images) and images[i]:
            blocks.append(IMAGE)
    data = body(*blocks)
    total = sum(lengths)
    out = shape(data, budget=budget, modern=False)
    if total <= budget:
        assert bytes(out) == data
        return
    result = as_json(out)
    assert out_text_sum(result) == budget
    assert cut_count(result) == total - budget
    assert sum(1 for b in result["content"] if b == IMAGE) == sum(1 for b in blocks if b == IMAGE)
    kept = "".join(texts(result)[:-1])
    assert kept == "".join(b["text"] for b in blocks if b["type"] == "text")[:budget]


@pytest.mark.parametrize(
    "data",
    [
        body(text("é" * 5), text('\\u00e9 "q"')),
        body(text("x"), {"type": "resource_link", "uri": "file:///a", "name": "a"}),
        body(text("x"), resultType="input_required"),
        b'{"content":[{"type":"text","text":5}]}',
        b'{"content":[{"type":"text","text":null}]}',
        b'{"content":[{"type":"text"}],"resultType":null}',
    ],
)
def test_a_result_that_fits_by_its_length_is_judged_as_one_whose_texts_were_read(
    data: bytes,
) -> None:
    # A result no longer than the budget is read without making its texts into
    # strings; it must come out as it does when they are read (and fit).
    blocks = json.loads(data)["content"]
    chars = sum(len(b["text"]) for b in blocks if isinstance(b.get("text"), str))
    assert chars < len(data)
    read = shape_call_result(Raw(data), modern=True, budget=chars, alias="notes")
    skimmed = shape_call_result(Raw(data), modern=True, budget=len(data), alias="notes")
    assert as_json(skimmed[0]) == as_json(read[0])
    assert skimmed[1] == read[1]
