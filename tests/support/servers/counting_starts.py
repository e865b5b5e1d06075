"""A stdio server that counts its starts, for tests of which process each server's first start
takes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.system.procs import SCRIPTED

# Each start of the server appends its pid (the same process execs the server); in the
# config, where `$$` stands for `$`.
COUNTED = 'echo $$$$ >> "$$1"; shift; exec "$$0" "$$@"'


def counted_server(starts: Path, extra: str = "") -> str:
    args = ["-c", COUNTED, sys.executable, str(starts), SCRIPTED]
    return f'command = "/bin/sh"\nargs = {json.dumps(args)}\n{extra}'


def starts(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []
