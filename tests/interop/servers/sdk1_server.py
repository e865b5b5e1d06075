"""A server on the v1 line of the Python SDK (``FastMCP`` from mcp 1.x): legacy only.

usage: python sdk1_server.py stdio | http PORT
"""

from __future__ import annotations

import sys

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


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.settings.host = "127.0.0.1"
        app.settings.port = int(sys.argv[2])
        app.run("streamable-http")
