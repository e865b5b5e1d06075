"""How deeply a config may nest (``nests_too_deep``): the bound counted in tables,
arrays and objects alike, walked without recursion however deep a file goes."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.config.loading.nesting import MAX_NESTING, nests_too_deep, too_deep_to_read


def nested(depth: int, kind: str = "dict") -> Any:
    node: Any = "leaf"
    for _ in range(depth):
        node = {"k": node} if kind == "dict" else [node]
    return node


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_the_bound_itself_is_allowed_and_one_more_is_not(kind: str) -> None:
    assert not nests_too_deep(nested(MAX_NESTING, kind))
    assert nests_too_deep(nested(MAX_NESTING + 1, kind))


def test_tables_and_arrays_count_alike() -> None:
    mixed: Any = "leaf"
    for i in range(MAX_NESTING + 1):
        mixed = {"k": mixed} if i % 2 else [mixed]
    assert nests_too_deep(mixed)


def test_an_empty_container_at_the_bound_counts_as_a_level() -> None:
    deep: Any = {}
    for _ in range(MAX_NESTING):
        deep = {"k": deep}
    assert nests_too_deep(deep)


def test_scalars_and_wide_shallow_files_are_fine() -> None:
    for scalar in ("x", 1, None, 1.5, True):
        assert not nests_too_deep(scalar)
    wide = {f"server{i}": {"args": list(range(50)), "env": {"A": "1"}} for i in range(500)}
    assert not nests_too_deep(wide)


def test_one_deep_branch_among_shallow_ones_is_found() -> None:
    config = {"a": 1, "servers": [{"x": 2}, {"deep": nested(MAX_NESTING)}], "z": [3]}
    assert nests_too_deep(config)


def test_far_deeper_than_the_interpreter_recurses_is_still_walked() -> None:
    assert nests_too_deep(nested(100_000))


def test_the_error_names_the_file_and_the_bound() -> None:
    assert too_deep_to_read("/etc/mcpd/config.toml") == (
        f"/etc/mcpd/config.toml: nested more than {MAX_NESTING} levels deep"
    )
