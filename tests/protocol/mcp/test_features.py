"""MCP beyond tools (``protocol.mcp.features``): which capability a server's request needs
of the agent it goes to (elicitation by its mode), whether an agent takes tasks, what
kind of result a server sent, and what a server's lists decode to, passed-through
parts kept as they came."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from protocol.mcp import features


@pytest.mark.parametrize(
    ("method", "need"),
    [
        ("elicitation/create", "elicitation"),
        ("sampling/createMessage", "sampling"),
        ("roots/list", "roots"),
        ("tools/call", None),
        ("ping", None),
        ("", None),
    ],
)
def test_each_request_a_server_may_send_needs_its_own_capability(
    method: str, need: str | None
) -> None:
    assert features.needs(method) == need


def test_a_request_mcpd_does_not_relay_is_never_declared() -> None:
    everything: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}, "tools": {}}
    assert not features.declares(everything, "tools/call")
    assert not features.declares(everything, "notifications/message")


def test_an_agent_that_declared_nothing_or_not_an_object_takes_no_request() -> None:
    caps: dict[str, Any] | None
    for caps in (None, {}, {"sampling": True}, {"sampling": []}, {"roots": None}):
        assert not features.declares(caps, "sampling/createMessage")
        assert not features.declares(caps, "roots/list")
    assert features.declares({"sampling": {}}, "sampling/createMessage")
    assert features.declares({"roots": {"listChanged": True}}, "roots/list")
    assert not features.declares({"sampling": {}}, "roots/list")


@pytest.mark.parametrize(
    ("caps", "params", "taken"),
    [
        ({}, {}, True),  # {}: form mode only
        ({}, {"mode": "form"}, True),
        ({}, {"mode": "url", "url": "https://x"}, False),
        ({"form": {}}, {"message": "hi"}, True),
        ({"form": {}}, {"mode": "url"}, False),
        ({"url": {}}, {"mode": "url"}, True),
        ({"url": {}}, {"message": "a form"}, False),  # URL mode only
        ({"url": {}}, {"mode": "form"}, False),
        ({"form": {}, "url": {}}, {"mode": "url"}, True),
        ({"form": {}, "url": {}}, {}, True),
        ({"url": True}, {"mode": "url"}, False),
    ],
)
def test_elicitation_is_declared_by_its_mode(
    caps: dict[str, Any], params: dict[str, Any], taken: bool
) -> None:
    assert features.declares({"elicitation": caps}, "elicitation/create", params) is taken


URL_ASK = {"method": "elicitation/create", "params": {"mode": "url", "url": "https://x"}}
FORM_ASK = {"method": "elicitation/create", "params": {"message": "name?"}}
ROOTS_ASK = {"method": "roots/list"}


@pytest.mark.parametrize(
    ("caps", "requests", "taken"),
    [
        ({"elicitation": {}}, {"a": FORM_ASK}, True),
        # {} and form alone are form mode only, whatever else is asked with it.
        ({"elicitation": {}}, {"a": URL_ASK}, False),
        ({"elicitation": {"form": {}}, "roots": {}}, {"a": ROOTS_ASK, "b": URL_ASK}, False),
        ({"elicitation": {"url": {}}, "roots": {}}, {"a": ROOTS_ASK, "b": URL_ASK}, True),
        ({"elicitation": {}}, {"a": FORM_ASK, "b": ROOTS_ASK}, False),
        ({"elicitation": {}}, {"a": {"method": "tools/call"}}, False),
        ({"elicitation": {}}, {"a": {"method": 5}}, False),
        ({"elicitation": {}}, {"a": "elicitation/create"}, False),
        ({"elicitation": {}}, ["a"], False),
        ({}, {"a": FORM_ASK}, False),
        (None, {}, False),
    ],
)
def test_an_agent_can_answer_what_it_declared_each_elicitation_in_its_mode(
    caps: dict[str, Any] | None, requests: Any, taken: bool
) -> None:
    assert features.answerable(requests, caps) is taken


def test_tasks_are_taken_only_by_an_agent_declaring_the_extension_as_an_object() -> None:
    ext = features.TASKS_EXTENSION
    caps: dict[str, Any] | None
    assert features.has_tasks({"extensions": {ext: {}}})
    assert features.has_tasks({"extensions": {ext: {"x": 1}, "other/ext": {}}})
    for caps in (
        None,
        {},
        {"extensions": None},
        {"extensions": []},
        {"extensions": {ext: True}},
        {"extensions": {"other/ext": {}}},
        {ext: {}},  # not under extensions
    ):
        assert not features.has_tasks(caps)


def head(raw: bytes) -> features.ResultHead:
    return msgspec.json.decode(raw, type=features.ResultHead)


def test_a_result_with_no_result_type_is_complete() -> None:
    assert head(b'{"content":[]}').kind == "complete"
    assert head(b'{"resultType":null}').kind == "complete"
    assert head(b'{"resultType":"input_required","inputRequests":{}}').kind == "input_required"
    task = head(b'{"resultType":"task","taskId":"t-1"}')
    assert task.kind == features.TASK and task.taskId == "t-1"


def test_a_result_type_that_is_not_a_string_is_refused_when_decoded() -> None:
    with pytest.raises(msgspec.ValidationError):
        head(b'{"resultType":5}')
    with pytest.raises(msgspec.ValidationError):
        head(b'{"inputRequests":[1]}')


def test_a_page_keeps_each_item_as_the_server_sent_it() -> None:
    raw = b'{"prompts":[{"name":"p","weird":{"deep":[1]}}],"nextCursor":"c2"}'
    page = msgspec.json.decode(raw, type=features.ListPage)
    assert page.nextCursor == "c2"
    assert isinstance(page.prompts, list)
    assert bytes(page.prompts[0]) == b'{"name":"p","weird":{"deep":[1]}}'


@pytest.mark.parametrize("ttl", [b"60000", b"1.5", b"1e20", b"1e400", b'"soon"'])
def test_a_page_decodes_whatever_its_ttl(ttl: bytes) -> None:
    """A ttlMs mcpd does not use is no reason to refuse the list it came with."""
    page = msgspec.json.decode(b'{"prompts":[],"ttlMs":' + ttl + b"}", type=features.ListPage)
    assert page.prompts == [] and bytes(page.ttlMs) == ttl  # type: ignore[arg-type]


def test_items_decode_with_what_mcpd_rewrites_typed_and_the_rest_passed_through() -> None:
    prompt = msgspec.json.decode(
        b'{"name":"p","arguments":[{"name":"a","required":true}],"icons":[{"src":"x"}],'
        b'"_meta":{"k":1}}',
        type=features.Prompt,
    )
    assert prompt.name == "p" and prompt.meta == {"k": 1}
    assert isinstance(prompt.arguments, list) and prompt.arguments[0].required is True
    assert isinstance(prompt.icons, msgspec.Raw) and bytes(prompt.icons) == b'[{"src":"x"}]'
    resource = msgspec.json.decode(b'{"uri":"file:///a"}', type=features.Resource)
    assert resource.uri == "file:///a" and resource.name is msgspec.UNSET
    # Encoded again, what was absent stays absent.
    assert msgspec.json.encode(resource) == b'{"uri":"file:///a"}'


def test_items_without_what_names_them_are_refused() -> None:
    for raw, kind in (
        (b'{"title":"no name"}', features.Prompt),
        (b'{"name":"no uri"}', features.Resource),
        (b'{"name":"no template"}', features.ResourceTemplate),
        (b'{"name":5}', features.Prompt),
        (b'{"uri":["x"]}', features.Resource),
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(raw, type=kind)
