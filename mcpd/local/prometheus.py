"""Prometheus' text exposition format: families of samples, written as ``GET
/metrics`` answers them."""

from __future__ import annotations

import math


def label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help: str) -> None:
        self.lines.append(f"# HELP {name} {help}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        inner = ",".join(f'{k}="{label_value(v)}"' for k, v in labels.items())
        self.lines.append(
            f"{name}{{{inner}}} {number(value)}" if inner else f"{name} {number(value)}"
        )
