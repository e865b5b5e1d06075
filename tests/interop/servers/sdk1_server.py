"""A server on the v1 line of the Python SDK (``FastMCP`` from mcp 1.x): legacy only.

usage: python sdk1_server.py stdio | http PORT [--tally]

``--tally`` adds a tool ``tally`` that answers how many times it ran for its ``key``.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.fastmcp import FastMCP

app = FastMCP("interop-sdk1-server")


@app.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
def boom(message: str = "it broke") -> str:
    """Fail on purpose."""
    raise RuntimeError(message)


def _add_tallying_tool() -> None:
    runs: dict[str, int] = {}

    @app.tool()
    async def tally(key: str) -> str:
        """Count this run for `key`, and answer `key` and the count so far."""
        runs[key] = runs.get(key, 0) + 1
        count = runs[key]
        await anyio.sleep(0.2)  # long enough for the calls made at once to overlap
        return f"{key} {count}"


if __name__ == "__main__":
    if "--tally" in sys.argv:
        _add_tallying_tool()
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.settings.host = "127.0.0.1"
        app.settings.port = int(sys.argv[2])
        app.run("streamable-http")
