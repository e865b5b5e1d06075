"""``mcpd import`` and ``mcpd check-config`` run as processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

MCPD = [sys.executable, "-m", "mcpd"]


def mcpd(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPD, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def warned(text: str) -> list[str]:
    """The warnings about an argument or a URL (others name a command, say)."""
    return [
        line
        for line in text.splitlines()
        if re.search(r"warning: servers\.\S+\.(args\[|url:)", line)
    ]
