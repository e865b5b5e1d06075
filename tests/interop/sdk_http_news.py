"""Drive an official Python SDK client over Streamable HTTP with a bearer token, in the
handshake era: subscribe to a resource, then print every notification the server sends
unasked, one JSON line each, until stdin closes; then end the session.

Runs under either SDK line: mcp 2.x (.venv) or mcp 1.x (.venv-peers-v1).

usage: python sdk_http_news.py URL TOKEN URI
Lines: {"ready": SDK_MAJOR}, then {"method": ..., "params": ...} per notification.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

import anyio


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def emit_notification(note: Any) -> None:
    params = getattr(note, "params", None)
    dumped = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params else None
    emit({"method": note.method, "params": dumped})


async def stdin_closed() -> None:
    await anyio.to_thread.run_sync(sys.stdin.read)


async def with_v2(url: str, token: str, uri: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def on_message(message: Any) -> None:
        if not isinstance(message, Exception):
            emit_notification(message)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource(uri)
        emit({"ready": 2})
        await stdin_closed()


async def with_v1(url: str, token: str, uri: str) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from pydantic import AnyUrl

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", None)  # a ServerNotification; requests have none
        if root is not None:
            emit_notification(root)

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        streamablehttp_client(url, headers=headers) as (read, write, _),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        await session.subscribe_resource(AnyUrl(uri))
        emit({"ready": 1})
        await stdin_closed()


def main() -> None:
    url, token, uri = sys.argv[1:4]
    run = with_v2 if int(version("mcp").split(".")[0]) >= 2 else with_v1
    anyio.run(run, url, token, uri)


main()
