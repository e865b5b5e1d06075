"""The demo tools' argument checks: the one sentence a bad call gets back, for each
keyword they read, JSON's own number rules, and what a schema leaves open."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpd.demo.arguments import check_demo_arguments, integer_argument, string_argument
from protocol.jsonrpc import messages as rpc

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2},
        "count": {"type": "integer", "minimum": 0, "maximum": 3},
        "ratio": {"type": "number", "minimum": 0.5},
        "mode": {"enum": ["a", 1, None]},
        "flag": {"type": "boolean"},
        "tags": {"type": "array"},
        "extra": {"type": "object"},
        "nothing": {"type": "null"},
        "anything": {},
        "odd": {"type": "uuid"},
        "either": {"type": ["string", "integer"]},
    },
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("args", [None, [], "name", 3, True])
def test_arguments_that_are_not_an_object_are_refused(args: Any) -> None:
    assert check_demo_arguments(SCHEMA, args) == "arguments must be an object"


def test_a_missing_required_argument_is_named_first() -> None:
    assert check_demo_arguments(SCHEMA, {"count": "bad"}) == "missing required argument 'name'"


def test_an_argument_not_in_the_schema_is_refused_only_where_it_says_so() -> None:
    assert check_demo_arguments(SCHEMA, {"name": "ab", "zz": 1}) == "unexpected argument 'zz'"
    open_ended = {**SCHEMA, "additionalProperties": True}
    assert check_demo_arguments(open_ended, {"name": "ab", "zz": 1}) is None
    assert check_demo_arguments({"properties": {}}, {"zz": 1}) is None


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"count": 2}, None),
        ({"count": 2.0}, None),
        ({"count": 2.5}, "argument 'count' must be of type integer, got float"),
        ({"count": True}, "argument 'count' must be of type integer, got bool"),
        ({"count": "2"}, "argument 'count' must be of type integer, got str"),
        ({"count": -1}, "argument 'count' must be at least 0"),
        ({"count": 4}, "argument 'count' must be at most 3"),
        ({"count": 4.0}, "argument 'count' must be at most 3"),
        ({"ratio": 1}, None),
        ({"ratio": 0.25}, "argument 'ratio' must be at least 0.5"),
        ({"ratio": False}, "argument 'ratio' must be of type number, got bool"),
        ({"ratio": None}, "argument 'ratio' must be of type number, got NoneType"),
        ({"flag": 1}, "argument 'flag' must be of type boolean, got int"),
        ({"flag": False}, None),
        ({"tags": {}}, "argument 'tags' must be of type array, got dict"),
        ({"extra": []}, "argument 'extra' must be of type object, got list"),
        ({"nothing": 0}, "argument 'nothing' must be of type null, got int"),
        ({"nothing": None}, None),
    ],
)
def test_types_and_bounds(args: dict[str, Any], problem: str | None) -> None:
    assert check_demo_arguments(SCHEMA, {"name": "ab", **args}) == problem


def test_a_string_shorter_than_its_minimum_is_refused() -> None:
    assert check_demo_arguments(SCHEMA, {"name": "a"}) == (
        "argument 'name' must have at least 2 characters"
    )
    assert check_demo_arguments(SCHEMA, {"name": "ab"}) is None


@pytest.mark.parametrize(("mode", "ok"), [("a", True), (1, True), (None, True), ("b", False)])
def test_an_enum_takes_only_its_values(mode: Any, ok: bool) -> None:
    problem = check_demo_arguments(SCHEMA, {"name": "ab", "mode": mode})
    assert problem == (None if ok else "argument 'mode' must be one of ['a', 1, None]")


def test_types_it_does_not_know_and_schemas_without_one_let_anything_through() -> None:
    for value in ("x", 1, [1], {"a": 1}, None):
        assert check_demo_arguments(SCHEMA, {"name": "ab", "anything": value}) is None
        assert check_demo_arguments(SCHEMA, {"name": "ab", "odd": value}) is None
        # A list of types is not one of the keywords it reads: left to the tool.
        assert check_demo_arguments(SCHEMA, {"name": "ab", "either": value}) is None


def test_bounds_are_not_applied_to_what_is_not_a_number() -> None:
    schema = {"properties": {"n": {"minimum": 5, "minLength": 3}}}
    assert check_demo_arguments(schema, {"n": "abcd"}) is None
    assert check_demo_arguments(schema, {"n": True}) is None
    assert check_demo_arguments(schema, {"n": 4}) == "argument 'n' must be at least 5"
    assert (
        check_demo_arguments(schema, {"n": "ab"}) == "argument 'n' must have at least 3 characters"
    )


def test_an_empty_schema_takes_any_object() -> None:
    assert check_demo_arguments({}, {}) is None
    assert check_demo_arguments({}, {"a": [1, 2]}) is None


@pytest.mark.parametrize(
    ("enum", "value"),
    [([1], True), ([0], False), ([True], 1), ([[1]], [True]), ([{"a": 0}], {"a": False})],
)
def test_an_enum_tells_true_and_false_from_numbers(enum: list[Any], value: Any) -> None:
    schema = {"properties": {"v": {"enum": enum}}}
    assert check_demo_arguments(schema, {"v": value}) == f"argument 'v' must be one of {enum!r}"


def test_an_enum_takes_a_number_however_it_is_written() -> None:
    schema = {"properties": {"v": {"enum": [1, [2], {"a": 3}]}}}
    for value in (1.0, [2.0], {"a": 3.0}):
        assert check_demo_arguments(schema, {"v": value}) is None


def test_a_handler_reads_a_checked_string_or_integer_as_one() -> None:
    args: rpc.JsonObject = {"name": "ab", "count": 2.0}
    assert string_argument(args, "name") == "ab"
    assert string_argument(args, "mode", "a") == "a"
    assert (
        integer_argument(args, "count", 0) == 2 and type(integer_argument(args, "count", 0)) is int
    )
    assert integer_argument(args, "other", 7) == 7


@pytest.mark.parametrize(
    ("read", "args"),
    [
        (lambda args: string_argument(args, "v"), {"v": 1}),
        (lambda args: string_argument(args, "v"), {}),
        (lambda args: integer_argument(args, "v", 0), {"v": 1.5}),
        (lambda args: integer_argument(args, "v", 0), {"v": True}),
        (lambda args: integer_argument(args, "v", 0), {"v": "1"}),
    ],
)
def test_an_argument_the_schema_did_not_make_of_its_kind_is_an_error(
    read: Callable[[rpc.JsonObject], object], args: rpc.JsonObject
) -> None:
    with pytest.raises(TypeError, match="argument 'v' is not"):
        read(args)
