"""A server on the official Python SDK that asks its client things during its calls.

usage: python asking_server.py stdio | http PORT

The SDK's resolvers ask the way the era of the connection wants: a 2025-11-25
client gets ``elicitation/create``, ``sampling/createMessage`` and ``roots/list``
requests in the middle of the call; a 2026-07-28 client gets ``input_required``
and calls again with the answers.
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Elicit, ListRoots, MCPServer, Resolve, Sample
from pydantic import BaseModel

app = MCPServer("asking-server")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_model(topic: str) -> Sample:
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=f"One word about {topic}?")
    )
    return Sample([message], max_tokens=20)


def ask_roots() -> ListRoots:
    return ListRoots()


@app.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Ask the user for their name, then greet them."""
    return f"Hello, {who.name}!"


@app.tool()
def muse(topic: str, said: Annotated[types.CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model for a word about the topic."""
    content = said.content
    text = content.text if isinstance(content, types.TextContent) else "?"
    return f"The model says {text!r} about {topic}"


@app.tool()
def where(roots: Annotated[types.ListRootsResult, Resolve(ask_roots)]) -> str:
    """List the client's roots."""
    return "roots: " + ", ".join(str(r.uri) for r in roots.roots)


@app.tool()
async def nap(seconds: float = 1.0) -> str:
    """Sleep, then answer (a call that asks nothing)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
