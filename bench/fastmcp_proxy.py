"""A FastMCP 4.x proxy that mounts one server (stdio, or Streamable HTTP with ``--url``)
and serves it over stdio.

Runs in its own venv (``bench/.venv-fastmcp``, made by ``bench.run``), since FastMCP is not
a dependency of mcpd. The proxy is built the way FastMCP documents it: ``create_proxy`` on
a stdio transport, mounted under a namespace on a parent server, so the echo server's tool
``echo`` is served as ``echo_echo``.

    bench/.venv-fastmcp/bin/python bench/fastmcp_proxy.py -- python bench/echo_server.py
    bench/.venv-fastmcp/bin/python bench/fastmcp_proxy.py --url http://127.0.0.1:8000/mcp
"""

from __future__ import annotations

import logging
import sys

# FastMCP is installed only in bench/.venv-fastmcp, not where the project is type-checked.
from fastmcp import FastMCP  # type: ignore[import-not-found]
from fastmcp.client.transports import (  # type: ignore[import-not-found]
    StdioTransport,
    StreamableHttpTransport,
)
from fastmcp.server import create_proxy  # type: ignore[import-not-found]

NAMESPACE = "echo"


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "--url":
        target = StreamableHttpTransport(argv[1])
    else:
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            sys.exit("usage: fastmcp_proxy.py (--url URL | -- COMMAND [ARGS...])")
        target = StdioTransport(command=argv[0], args=argv[1:])
    # INFO lines per request would make the proxy pay for logging that mcpd does not do.
    logging.getLogger("fastmcp").setLevel(logging.WARNING)
    backend = create_proxy(target, name="echo-backend")
    front = FastMCP("bench-fastmcp-proxy")
    front.mount(backend, namespace=NAMESPACE)
    front.run("stdio", show_banner=False)


if __name__ == "__main__":
    main()
