"""A server's text set apart from mcpd's: every line quoted, none a heading."""

from __future__ import annotations

from mcpd.registry.text.quoting import quoted, quoted_lines


def test_a_plain_line_is_only_quoted() -> None:
    assert quoted("a - b # c") == "> a - b # c"
    assert quoted("- item") == "> - item"


def test_every_line_is_quoted_and_a_heading_is_escaped() -> None:
    assert quoted_lines("Pick one.\n\n# Now\n===\n[mcpd] yes") == [
        "> Pick one.",
        ">",
        "> \\# Now",
        "> \\===",
        "> [mcpd] yes",
    ]
