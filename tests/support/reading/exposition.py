"""Prometheus' text exposition format read back, strictly: what a scraper would make
of ``GET /metrics``, so a test can say what it saw rather than match strings."""

from __future__ import annotations

import re
from typing import Final

_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES: Final = {"\\": "\\", '"': '"', "n": "\n"}

Sample = tuple[str, dict[str, str], str]  # (name, labels, the value as written)


class Family:
    def __init__(self, name: str, help: str, kind: str) -> None:
        self.name, self.help, self.kind = name, help, kind
        self.samples: list[Sample] = []


def _labels(text: str, at: int) -> tuple[dict[str, str], int]:
    """The labels from ``{`` at ``at``; and where the text after ``}`` begins."""
    labels: dict[str, str] = {}
    at += 1
    while text[at] != "}":
        name = _LABEL.match(text, at)
        assert name is not None, f"no label name at {text[at:]!r}"
        at = name.end()
        assert text[at : at + 2] == '="', f'no =" after {name.group()!r}'
        at += 2
        value = []
        while text[at] != '"':
            if text[at] == "\\":
                value.append(_ESCAPES[text[at + 1]])  # any other escape is malformed
                at += 2
            else:
                assert text[at] != "\n"
                value.append(text[at])
                at += 1
        assert name.group() not in labels, f"label {name.group()!r} twice"
        labels[name.group()] = "".join(value)
        at += 1
        if text[at] == ",":
            at += 1
    return labels, at + 1


def parse(text: str) -> dict[str, Family]:
    """Every family with its samples, by name; raises AssertionError on anything a
    scraper would refuse (a sample outside its family, a bad escape, a bad line)."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    current: Family | None = None
    helps: dict[str, str] = {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help = line[7:].partition(" ")
            helps[name] = help
            continue
        if line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name not in families, f"family {name} twice"
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            current = families[name] = Family(name, helps.pop(name), kind)
            continue
        match = _NAME.match(line)
        assert match is not None, f"not a sample: {line!r}"
        name, at = match.group(), match.end()
        labels: dict[str, str] = {}
        if line[at : at + 1] == "{":
            labels, at = _labels(line, at)
        assert line[at] == " ", f"no value in {line!r}"
        value = line[at + 1 :]
        float(value.replace("Inf", "inf"))
        assert current is not None and name.startswith(current.name), f"{name} outside family"
        current.samples.append((name, labels, value))
    return families
