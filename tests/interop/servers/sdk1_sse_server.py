"""A v1 Python SDK server (``FastMCP`` from mcp 1.x) for the old HTTP+SSE transport.

usage: python sdk1_sse_server.py sse PORT | stdio

Over ``sse`` it serves the stream at /sse and takes messages at /messages/.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP

app = FastMCP("interop-sdk1-sse-server")


@app.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
async def count_up(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to ``steps``, reporting progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted {steps}"


@app.tool()
async def nap(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Sleep, then answer; a progress notification says the nap began."""
    await ctx.report_progress(0, seconds, "napping")
    await anyio.sleep(seconds)
    return f"slept {seconds}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.settings.host = "127.0.0.1"
        app.settings.port = int(sys.argv[2])
        app.run("sse")
