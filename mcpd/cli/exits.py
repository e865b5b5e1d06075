"""The ``mcpd`` command's exit codes, and how a command stops with one.

0 ok, 1 the tool returned isError, 2 usage, 3 daemon unreachable, 4 the daemon's
reply could not be read, 78 (``EX_CONFIG``) config error. They are here, apart from
``main``, because every module of commands stops with them.
"""

from __future__ import annotations

import sys
from typing import NoReturn

EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_BAD_REPLY = 4


def fail(code: int, message: str) -> NoReturn:
    print(f"mcpd: {message}", file=sys.stderr)
    raise SystemExit(code)
