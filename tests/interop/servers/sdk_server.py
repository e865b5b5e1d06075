"""A server on the official Python SDK (v2, ``MCPServer``), speaking both eras.

usage: python sdk_server.py stdio | http PORT [--json] [--stateless] [--idle SECONDS] [--ask]
       [--grow] [--tally]

``--idle`` ends a stateful session after that many seconds without a request.
``--ask`` adds a tool ``ask`` that sends requests back to the client during the call.
``--grow`` adds a tool ``grow`` that adds a tool and tells subscribers the list changed.
``--tally`` adds a tool ``tally`` that answers how many times it ran for its ``key``.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("interop-sdk-server")


@app.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
def boom(message: str = "it broke") -> str:
    """Fail on purpose."""
    raise RuntimeError(message)


@app.tool()
def long_text(kb: int = 20) -> str:
    """Return about `kb` kilobytes of text."""
    row = "abcdefghijklmnopqrstuvwxyz0123456789\n"
    return (row * (kb * 1024 // len(row) + 1))[: kb * 1024]


@app.tool()
async def nap(seconds: float = 1.0) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
async def count_up(steps: int = 3, ctx: Context = None) -> str:  # type: ignore[assignment]
    """Report progress once per step."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await anyio.sleep(0.05)
    return f"counted {steps}"


def _add_asking_tool() -> None:
    import mcp_types
    from mcp.shared.message import ServerMessageMetadata

    @app.tool()
    async def ask(ctx: Context = None) -> str:  # type: ignore[assignment]
        """Ping the client, then ask it for a name, on this call's own stream."""
        request_id = ctx.request_context.request_id
        scoped = ServerMessageMetadata(related_request_id=request_id)
        await ctx.session.send_request(
            mcp_types.PingRequest(), mcp_types.EmptyResult, metadata=scoped
        )
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        try:
            await ctx.session.elicit_form("Your name?", schema, related_request_id=request_id)
        except Exception as exc:
            return f"pinged; elicitation refused: {exc}"
        return "pinged; elicitation answered"


def _add_growing_tool() -> None:
    @app.tool()
    async def grow(name: str, ctx: Context = None) -> str:  # type: ignore[assignment]
        """Add a tool called `name` that answers with its own name."""

        def grown() -> str:
            return name

        app.add_tool(grown, name=name, description=f"Added by grow({name!r}).")
        await ctx.notify_tools_changed()
        return f"added {name}"


def _add_tallying_tool() -> None:
    runs: dict[str, int] = {}

    @app.tool()
    async def tally(key: str) -> str:
        """Count this run for `key`, and answer `key` and the count so far."""
        runs[key] = runs.get(key, 0) + 1
        count = runs[key]
        await anyio.sleep(0.2)  # long enough for the calls made at once to overlap
        return f"{key} {count}"


def _idle_option(argv: list[str]) -> dict[str, float]:
    if "--idle" not in argv:
        return {}
    return {"session_idle_timeout": float(argv[argv.index("--idle") + 1])}


if __name__ == "__main__":
    if "--ask" in sys.argv:
        _add_asking_tool()
    if "--grow" in sys.argv:
        _add_growing_tool()
    if "--tally" in sys.argv:
        _add_tallying_tool()
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response="--json" in sys.argv,
            stateless_http="--stateless" in sys.argv,
            **_idle_option(sys.argv),
        )
