"""A line TOML cannot read costs the error no more to say however long it is: no more
than the start of it, and of each line above it, is examined."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from mcpd.config.loading import toml_errors
from mcpd.config.loading.toml_errors import syntax_error

LONG = 200_000


class _Recorded:
    """A pattern that notes the length of each text it is matched against."""

    def __init__(self, pattern: re.Pattern[str], lengths: list[int]) -> None:
        self.pattern, self.lengths = pattern, lengths

    def match(self, text: str) -> re.Match[str] | None:
        self.lengths.append(len(text))
        return self.pattern.match(text)


def _said(text: str) -> str:
    with pytest.raises(tomllib.TOMLDecodeError) as caught:
        tomllib.loads(text)
    return syntax_error(text, str(caught.value))


@pytest.fixture
def lengths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    tokens = toml_errors._tokens

    def recorded_tokens(line: str, column: int) -> Any:
        seen.append(len(line))
        return tokens(line, column)

    monkeypatch.setattr(toml_errors, "_tokens", recorded_tokens)
    monkeypatch.setattr(toml_errors, "_HEADER_RE", _Recorded(toml_errors._HEADER_RE, seen))
    return seen


def test_a_long_word_before_the_error_is_examined_only_at_its_start(lengths: list[int]) -> None:
    said = _said("a" * LONG + ".! = 1\n")
    assert said.startswith("Invalid initial character for a key part (at line 1, column")
    assert said.endswith(": ***")  # no key can be told in what is examined
    assert lengths and max(lengths) <= toml_errors._EXAMINED


def test_a_long_value_at_the_error_is_examined_only_at_its_start(lengths: list[int]) -> None:
    said = _said('[servers.x]\ncommand = "node"\nenv.A = ' + "b" * LONG + "\n")
    assert "env.A = ***" in said and "b" * 10 not in said
    assert lengths and max(lengths) <= toml_errors._EXAMINED


def test_a_long_table_line_above_a_key_set_twice_is_examined_only_at_its_start(
    lengths: list[int],
) -> None:
    text = "[servers" + " " * LONG + '.x]\ncommand = "a"\ncommand = "b"\n'
    said = _said(text)
    assert said.startswith("Cannot overwrite a value (at line 3")
    assert said.endswith("command is set twice")
    assert lengths and max(lengths) <= toml_errors._EXAMINED
