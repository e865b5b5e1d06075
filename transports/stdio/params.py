"""What a stdio transport is given from its server's configuration: the command and
how it is started, and the bounds its lines and its stopping are held to; and the
environment the child gets of them (``process.childenv`` decides what is inherited)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

from protocol.lines.framing import DEFAULT_MAX_LINE
from protocol.pacing.read_budget import DEFAULT_RATE

from .process.childenv import environment
from .sandbox.plan import Sandbox

__all__ = ["StdioParams", "child_environment"]


class StdioParams(msgspec.Struct, frozen=True):
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    # What it inherits of mcpd's environment besides the default set (``process.childenv``),
    # what of it is kept for others, and what mcpd sets for it (its own HOME).
    inherit_env: bool | tuple[str, ...] = False
    withheld: frozenset[str] = frozenset()
    provided: dict[str, str] | None = None
    # None: started as it is, in mcpd's working directory.
    sandbox: Sandbox | None = None
    max_line: int = DEFAULT_MAX_LINE
    read_budget: int = DEFAULT_RATE  # what stdout is read at of what answers nothing
    stdin_grace: float = 2.0
    term_grace: float = 3.0
    stderr_tail: int = 20


def child_environment(params: StdioParams, base: Mapping[str, str] | None = None) -> dict[str, str]:
    return environment(
        params.inherit_env,
        params.env,
        os.environ if base is None else base,
        withheld=params.withheld,
        provided=params.provided,
    )
