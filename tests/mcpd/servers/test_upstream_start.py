"""``Upstream.start`` is one body for every transport: how a call goes to a
transport that has headers and a session to lose is settled when the upstream is
made, not asked again at each call."""

from __future__ import annotations

import ast
import inspect
import textwrap

from mcpd.servers.upstream import Upstream


def _attributes_read(function: object) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def test_start_does_not_branch_on_the_transport_kind() -> None:
    assert "http" not in _attributes_read(Upstream.start)


def test_start_sends_through_what_the_upstream_was_made_with() -> None:
    assert "_send_call" in _attributes_read(Upstream.start)
