"""What a prompts/get may ask and a completion may give: a prompt's arguments refused,
naming the argument, unless an object of strings; a server's long completion cut to
``MAX_VALUES`` values and marked as having more, its total kept honest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import UNSET, Raw

from mcpd.agents.beyond_tools.prompt_bounds import MAX_VALUES, capped_completion, check_arguments
from protocol.jsonrpc import messages as rpc


def raw(value: Any) -> Raw:
    return Raw(json.dumps(value).encode())


@pytest.mark.parametrize("arguments", [UNSET, raw({}), raw({"a": "1", "b": ""})])
def test_an_object_of_strings_or_none_at_all_is_asked(arguments: Any) -> None:
    check_arguments(arguments)


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [([], "an array"), ("x", "a string"), (3, "a number"), (None, "null"), (True, "a boolean")],
)
def test_arguments_that_are_not_an_object_are_refused_saying_what_they_are(
    arguments: Any, kind: str
) -> None:
    with pytest.raises(rpc.RPCError) as info:
        check_arguments(raw(arguments))
    assert info.value.code == rpc.INVALID_PARAMS
    assert info.value.message == f"prompt arguments are an object of strings, not {kind}"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (1, "a number"),
        (1.5, "a number"),
        ([], "an array"),
        ({}, "an object"),
        (None, "null"),
        (False, "a boolean"),
    ],
)
def test_an_argument_that_is_not_a_string_is_refused_by_name(value: Any, kind: str) -> None:
    with pytest.raises(rpc.RPCError) as info:
        check_arguments(raw({"ok": "x", "city": value}))
    assert info.value.message == f"the prompt argument 'city' is {kind}: arguments are strings"
    assert info.value.data == {"argument": "city"}


def test_a_long_argument_name_is_cut_where_it_is_named() -> None:
    name = "n" * 5000
    with pytest.raises(rpc.RPCError) as info:
        check_arguments(raw({name: 1}))
    assert info.value.data == {"argument": "n" * 200}
    assert len(info.value.message) < 300


def completion(values: list[Any], **more: Any) -> Raw:
    return raw({"completion": {"values": values, **more}, "_meta": {"k": 1}})


@pytest.mark.parametrize(
    "result",
    [
        completion(["a"] * MAX_VALUES),
        raw({}),
        raw({"completion": None}),
        raw({"completion": {"values": "not a list"}}),
        raw([1, 2]),
        raw("text"),
    ],
    ids=["at-the-cap", "no-completion", "null", "values-not-a-list", "an-array", "a-string"],
)
def test_a_completion_within_the_cap_or_of_another_shape_is_left_as_it_is(result: Raw) -> None:
    assert capped_completion(result) is None


def test_a_longer_completion_is_cut_and_marked_as_having_more() -> None:
    values = [f"v{i}" for i in range(MAX_VALUES + 5)]
    capped = capped_completion(completion(values, hasMore=False))
    assert capped == {
        "completion": {"values": values[:MAX_VALUES], "hasMore": True, "total": MAX_VALUES + 5},
        "_meta": {"k": 1},
    }


@pytest.mark.parametrize(
    ("total", "kept"),
    [
        (1000, 1000),
        (MAX_VALUES + 1, MAX_VALUES + 3),
        (3, MAX_VALUES + 3),
        (True, MAX_VALUES + 3),
        ("many", MAX_VALUES + 3),
        (None, MAX_VALUES + 3),
    ],
)
def test_the_total_is_kept_only_where_it_counts_at_least_the_values_given(
    total: Any, kept: int
) -> None:
    capped = capped_completion(completion(["x"] * (MAX_VALUES + 3), total=total))
    assert capped is not None
    assert capped["completion"]["total"] == kept
