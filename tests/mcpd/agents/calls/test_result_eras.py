"""A tool's result in the shape of its agent's era (``result_eras``): what a legacy
agent's SDK refuses is left off, the value kept for the model; the upstream server's
name for itself reaches no agent."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import Raw

from mcpd.agents.calls.result_eras import LEGACY_NONE_READ, plain_for_era
from mcpd.agents.calls.results import shape_call_result

SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def shaped(result: dict[str, Any] | bytes, *, modern: bool, budget: int = 1000) -> Any:
    data = (
        result if isinstance(result, bytes) else json.dumps(result, separators=(",", ":")).encode()
    )
    out = shape_call_result(Raw(data), modern=modern, budget=budget, alias="s")[0]
    decoded = json.loads(bytes(out) if isinstance(out, Raw) else msgspec.json.encode(out))
    assert isinstance(decoded, dict)
    return decoded


def text(s: str) -> dict[str, str]:
    return {"type": "text", "text": s}


@pytest.mark.parametrize("value", [["a", "b"], 5, "x", True])
def test_structured_content_that_is_no_object_is_left_off_for_a_legacy_agent(
    value: object,
) -> None:
    result = {"resultType": "complete", "content": [text("a, b")], "structuredContent": value}
    assert shaped(result, modern=False) == {"content": [text("a, b")]}
    assert shaped(result, modern=True) == result


def test_its_value_becomes_the_text_when_the_result_held_nothing_else() -> None:
    result = {"structuredContent": ["a", {"b": "c\\n"}], "content": []}
    assert shaped(result, modern=False) == {"content": [text('["a",{"b":"c\\\\n"}]')]}
    assert shaped({"content": [], "structuredContent": None}, modern=False) == {"content": []}


def test_the_text_made_of_it_is_held_to_the_budget() -> None:
    result = {"content": [], "structuredContent": ["y" * 50]}
    got = shaped(result, modern=False, budget=20)
    assert got["content"][0] == text('["' + "y" * 18)
    assert "more characters were cut" in got["content"][1]["text"]
    assert set(got) == {"content"}


def test_an_object_and_every_other_member_pass_as_they_came() -> None:
    data = (
        b'{"content":[{"type":"text","text":"caf\\u00e9"}],"structuredContent":{"n":[1, 2]},'
        b'"isError":false,"_meta":{"k":1}}'
    )
    out = shape_call_result(Raw(data), modern=False, budget=1000, alias="s")[0]
    assert bytes(out) == data
    # Left off, the rest is copied as its bytes came.
    data = b'{"resultType":"complete","content":[{"type":"text","text":"caf\\u00e9"}]}'
    out = shape_call_result(Raw(data), modern=False, budget=1000, alias="s")[0]
    assert bytes(out) == b'{"content":[{"type":"text","text":"caf\\u00e9"}]}'


@pytest.mark.parametrize("kind", ["complete", None])
def test_a_legacy_agent_gets_no_result_type(kind: str | None) -> None:
    result = {"resultType": kind, "content": [text("ok")], "isError": False}
    assert shaped(result, modern=False) == {"content": [text("ok")], "isError": False}


def test_a_legacy_agent_is_still_told_an_input_required_it_cannot_answer() -> None:
    asks = {"q": {"method": "roots/list"}}
    result = {"resultType": "input_required", "inputRequests": asks, "structuredContent": [1]}
    got = shaped(result, modern=False)
    assert got["isError"] is True and "resultType" not in got
    assert got["content"][0]["text"].startswith("The tool server 's' asked for input")


@pytest.mark.parametrize("modern", [True, False])
def test_the_servers_name_for_itself_is_left_out_of_meta(modern: bool) -> None:
    info = {SERVER_INFO: {"name": "upstream", "version": "1"}}
    result = {"content": [text("ok")], "_meta": {**info, "k": 1}}
    assert shaped(result, modern=modern)["_meta"] == {"k": 1}
    alone = shaped({"content": [text("ok")], "_meta": info}, modern=modern)
    assert "_meta" not in alone
    handed = {"resultType": "input_required", "requestState": "s1", "_meta": info}
    assert shaped(handed, modern=True) == {"resultType": "input_required", "requestState": "s1"}
    # Only a member of _meta is the server's name: the same words elsewhere are not.
    kept = {"content": [text(SERVER_INFO)], "_meta": {"k": {SERVER_INFO: 1}}}
    assert shaped(kept, modern=False) == kept


def test_a_result_other_than_a_tools_is_plain_for_each_era() -> None:
    raw = Raw(
        b'{"resultType":"complete","ttlMs":5,"cacheScope":"private","contents":[],'
        b'"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}'
    )
    legacy = plain_for_era(raw, False, LEGACY_NONE_READ)
    assert legacy == {"contents": []}
    modern = plain_for_era(Raw(bytes(raw)), True, LEGACY_NONE_READ)
    assert modern == {"resultType": "complete", "ttlMs": 5, "cacheScope": "private", "contents": []}
    plain = Raw(b'{"messages":[]}')
    assert plain_for_era(plain, False) is plain
    assert plain_for_era(plain, True) is plain
