"""A server on the official Python SDK over one folder: its files as resources.

usage: python folder_server.py FOLDER stdio | FOLDER http PORT

Every file is the resource ``file:///NAME`` (relative to the folder, so two
instances over two folders list the same URIs), every file also matches the
template ``file:///{name}``, and the prompt ``review`` embeds one. ``show`` returns a
link to a file and the file itself; ``touch`` rewrites a file and tells subscribers;
``add_file`` adds a file and a prompt, and says both lists changed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

FOLDER = Path(sys.argv[1]).resolve()
app = MCPServer(f"folder-{FOLDER.name}")
subscribed: set[str] = set()


def _uri(name: str) -> str:
    return f"file:///{name}"


def _file(name: str) -> Path:
    path = (FOLDER / name).resolve()
    if path.parent != FOLDER or not path.is_file():
        raise ValueError(f"no file {name!r} in {FOLDER.name}")
    return path


def _add(name: str) -> None:
    def read() -> str:
        return _file(name).read_text()

    app.resource(
        _uri(name), name=name, description=f"{name} in {FOLDER.name}", mime_type="text/plain"
    )(read)


for entry in sorted(FOLDER.iterdir()):
    if entry.is_file():
        _add(entry.name)


@app.resource("file:///{name}", name="file", description="any file of the folder")
def any_file(name: str) -> str:
    return _file(name).read_text()


@app.prompt(description="Review one file")
def review(name: str) -> list[dict[str, Any]]:
    resource = {"uri": _uri(name), "mimeType": "text/plain", "text": _file(name).read_text()}
    return [
        {"role": "user", "content": f"Please review {name} from {FOLDER.name}:"},
        {"role": "user", "content": {"type": "resource", "resource": resource}},
    ]


@app.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
    names = sorted(p.name for p in FOLDER.iterdir() if p.name.startswith(argument.value))
    return types.Completion(values=names, total=len(names), has_more=False)


@app.tool()
def show(name: str) -> list[Any]:
    """A link to a file, and the file itself."""
    link = types.ResourceLink(type="resource_link", uri=_uri(name), name=name)
    inner = types.TextResourceContents(uri=_uri(name), text=_file(name).read_text())
    return [link, types.EmbeddedResource(type="resource", resource=inner)]


@app.tool()
async def touch(name: str, text: str, ctx: Context) -> str:
    """Write a file, and tell whoever subscribed to it."""
    _file(name).write_text(text)
    uri = _uri(name)
    if (ctx.protocol_version or "") >= "2026-07-28":
        await ctx.notify_resource_updated(uri)
    elif uri in subscribed:
        await ctx.session.send_resource_updated(uri)
    return f"wrote {name}"


@app.tool()
async def add_file(name: str, text: str, ctx: Context) -> str:
    """Create a file: a new resource, and a prompt to review it."""
    (FOLDER / name).write_text(text)
    _add(name)

    def review_it() -> str:
        return f"Review {name}."

    app.prompt(name=f"review_{name.split('.')[0]}", description=f"Review {name}")(review_it)
    if (ctx.protocol_version or "") >= "2026-07-28":
        await ctx.notify_resources_changed()
        await ctx.notify_prompts_changed()
    else:
        await ctx.session.send_resource_list_changed()
        await ctx.session.send_prompt_list_changed()
    return f"added {name}"


async def _subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


# Legacy clients subscribe with resources/subscribe; the SDK serves it when asked to.
app._lowlevel_server.add_request_handler(
    "resources/subscribe", types.SubscribeRequestParams, _subscribe
)
app._lowlevel_server.add_request_handler(
    "resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe
)

if __name__ == "__main__":
    if sys.argv[2] == "stdio":
        app.run("stdio")
    else:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
