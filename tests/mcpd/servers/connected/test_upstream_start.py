"""``Upstream.start`` says itself how a call goes to its transport: over Streamable
HTTP with its headers (``_send_over_http``), else through the transport's own ``send``,
the call taking the answer; nothing chosen elsewhere stands between."""

from __future__ import annotations

import ast
import inspect
import textwrap

from mcpd.servers.connected.upstream import Upstream


def _attributes_read(function: object) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def test_start_names_both_ways_a_call_is_sent() -> None:
    read = _attributes_read(Upstream.start)
    assert {"http", "_send_over_http", "transport", "send"} <= read


def test_no_sender_is_chosen_when_the_upstream_is_made() -> None:
    assert "partial" not in _attributes_read(Upstream.__init__)
