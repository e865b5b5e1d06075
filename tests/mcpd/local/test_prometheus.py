"""Prometheus' text format as ``GET /metrics`` writes it: whatever a label's value
holds, each sample is one line a scraper reads back to the very same value."""

from __future__ import annotations

import pytest

from mcpd.local.prometheus import Writer, label_value, number
from tests.support.reading.exposition import parse

HOSTILE = [
    'a"b',
    "back\\slash",
    "trailing\\",
    'x"} 1\nmcpd_server_up{server="bank"} 0',
    "\n",
    "\\n",
    '\\"',
    "",
    "tab\there\r\x00\x1b[31m",
    "ü数🙂",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_label_value_reads_back_as_it_was_on_one_line(value: str) -> None:
    out = Writer()
    out.family("mcpd_test", "gauge", "A test.")
    out.sample("mcpd_test", {"server": value, "state": "ready"}, 1)
    text = "\n".join(out.lines) + "\n"
    assert len(out.lines) == 3 and "\n" not in out.lines[2]
    [family] = parse(text).values()
    assert family.samples == [("mcpd_test", {"server": value, "state": "ready"}, "1")]


def test_escaping_is_the_three_the_format_has() -> None:
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert label_value("\\n") == "\\\\n"  # a backslash and an n, not a line feed
    assert label_value("\r\t") == "\r\t"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (0, "0"),
        (-0.0, "0"),
        (3, "3"),
        (3.0, "3"),
        (0.25, "0.25"),
        (1e-5, "1e-05"),
        (2**63, str(2**63)),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
    ],
)
def test_numbers_are_written_as_a_scraper_reads_them(value: float, written: str) -> None:
    assert number(value) == written


def test_a_family_without_labels_and_the_order_of_labels() -> None:
    out = Writer()
    out.family("mcpd_tools", "gauge", "Tools.")
    out.sample("mcpd_tools", {}, 7)
    out.sample("mcpd_tools", {"b": "1", "a": "2"}, 0.5)
    assert out.lines == [
        "# HELP mcpd_tools Tools.",
        "# TYPE mcpd_tools gauge",
        "mcpd_tools 7",
        'mcpd_tools{b="1",a="2"} 0.5',
    ]
