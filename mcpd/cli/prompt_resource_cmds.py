"""``mcpd prompts``, ``mcpd resources``, ``mcpd read URI``, ``mcpd prompt NAME '{...}'``.

The CLI is an agent without a user interface: it declares no capabilities, so a
server that needs input to answer (elicitation, sampling, roots) gets refused and
the command says so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable

from protocol.jsonrpc.messages import Json, JsonObject
from protocol.mcp import core as mcp
from protocol.shown.visible import quote, visible

from .client import JSON_HELP, LONG, QUICK, Client
from .exits import EXIT_BAD_REPLY, EXIT_FAILED, arguments_given, ask_object, fail

# A client on the daemon's socket, waiting so many seconds for each reply.
ClientFor = Callable[[argparse.Namespace, float], Client]


def _all(client: Client, method: str, key: str) -> list[JsonObject]:
    items: list[JsonObject] = []
    cursor: str | None = None
    while True:
        result = ask_object(client, method, {"cursor": cursor} if cursor else None)
        page, following = result.get(key, []), result.get("nextCursor")
        if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
            fail(EXIT_BAD_REPLY, f"the answer of mcpd to {method} could not be read ({key})")
        if following is not None and not isinstance(following, str):
            fail(EXIT_BAD_REPLY, f"the answer of mcpd to {method} could not be read (its cursor)")
        items += _objects(page)
        cursor = following
        if not cursor:
            return items


def _objects(value: Json) -> list[JsonObject]:
    """The objects of a list a server wrote (none of anything else)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _table(rows: list[tuple[str, str, str]], header: tuple[str, str, str]) -> None:
    width = shutil.get_terminal_size((120, 20)).columns
    rows = [(visible(a), visible(b), visible(c.replace("\n", " "))) for a, b, c in rows]
    first = max([len(r[0]) for r in rows] + [len(header[0])])
    print(f"{header[0]:<{first}}  {header[1]:<12} {header[2]}")
    for a, b, c in rows:
        room = max(20, width - first - 16)
        print(f"{a:<{first}}  {b:<12} {c if len(c) <= room else c[: room - 1] + '…'}")


def _server(item: JsonObject) -> str:
    meta = item.get("_meta")
    return str(meta.get("mcpd/server", "?")) if isinstance(meta, dict) else "?"


def cmd_prompts(args: argparse.Namespace, client_for: ClientFor) -> int:
    with client_for(args, QUICK) as client:
        if not args.json:
            client.for_a_person()
        prompts = _all(client, "prompts/list", "prompts")
    if args.json:
        print(json.dumps({"prompts": prompts}, indent=2))
        return 0
    rows = []
    for p in prompts:
        arguments = _objects(p.get("arguments"))
        names = [f"{a.get('name')}{'' if a.get('required') else '?'}" for a in arguments]
        shown = f"{p.get('name')}({', '.join(names)})"
        rows.append((shown, _server(p), str(p.get("description") or "")))
    _table(rows, ("PROMPT", "SERVER", "DESCRIPTION"))
    print(f"{len(prompts)} prompts")
    return 0


def cmd_resources(args: argparse.Namespace, client_for: ClientFor) -> int:
    with client_for(args, QUICK) as client:
        if not args.json:
            client.for_a_person()
        resources = _all(client, "resources/list", "resources")
        templates = _all(client, "resources/templates/list", "resourceTemplates")
    if args.json:
        print(json.dumps({"resources": resources, "resourceTemplates": templates}, indent=2))
        return 0
    rows = [(str(r.get("uri")), _server(r), str(r.get("name") or "")) for r in resources]
    rows += [
        (str(t.get("uriTemplate")), _server(t), f"(template) {t.get('name') or ''}")
        for t in templates
    ]
    _table(rows, ("URI", "SERVER", "NAME"))
    print(f"{len(resources)} resources, {len(templates)} templates")
    return 0


def cmd_read(args: argparse.Namespace, client_for: ClientFor) -> int:
    with client_for(args, LONG) as client:
        result = ask_object(client, "resources/read", {"uri": args.uri})
    if args.json:
        print(json.dumps(result, indent=2))
    refuse_unfinished(f"reading {args.uri}", result)
    if args.json:
        return 0
    for item in _objects(result.get("contents")):
        if "text" in item:
            text = visible(str(item["text"]), lines=True)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            blob = item.get("blob")
            size = (len(blob) if isinstance(blob, str) else 0) * 3 // 4
            kind = visible(str(item.get("mimeType") or "binary"))
            print(f"[{kind} content, about {size} bytes: {visible(str(item.get('uri')))}]")
    return 0


def cmd_prompt(args: argparse.Namespace, client_for: ClientFor) -> int:
    arguments = arguments_given(args.arguments)
    with client_for(args, LONG) as client:
        result = ask_object(client, "prompts/get", {"name": args.name, "arguments": arguments})
    if args.json:
        print(json.dumps(result, indent=2))
    refuse_unfinished(f"the prompt {args.name}", result)
    if args.json:
        return 0
    messages = result.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            message = {"content": message}
        content = message.get("content") or {}
        for block in content if isinstance(content, list) else [content]:
            print(f"{visible(str(message.get('role', '?')))}: {render_block(block)}")
    return 0


def refuse_unfinished(what: str, result: JsonObject) -> None:
    """End the command (exit 1, saying why) when ``result`` is not a finished one. An
    ``input_required`` that reaches it asks at most to be called again (a busy server
    does): it declares nothing it could answer more with. No other ``resultType`` but
    complete is a result to show; a result without one is a legacy server's, finished."""
    kind = result.get("resultType", mcp.COMPLETE)
    if kind == mcp.COMPLETE:
        return
    if kind == mcp.INPUT_REQUIRED:
        asked = result.get("inputRequests")
        if isinstance(asked, dict) and asked:
            keys = ", ".join(quote(str(k), 40) for k in list(asked)[:5])
            why = f"its server asked for input this command cannot give ({keys})"
        else:
            why = "its server asked to be called again with the state it returned (it may be busy)"
        fail(EXIT_FAILED, f"{what} did not finish: {why}; nothing was returned")
    fail(
        EXIT_FAILED, f"{what} did not finish: its server returned the resultType {quote(str(kind))}"
    )


def render_block(block: object) -> str:
    """One content block (of a tool result or a prompt message) for people: text as it
    is, anything else as what it is, where it is and how big; what the server wrote
    made ``visible``."""
    return visible(_describe(block), lines=True)


def _describe(block: object) -> str:
    # A server may send anything here: what is no block is said as what it is.
    if not isinstance(block, dict):
        return f"[{type(block).__name__} where a content block belongs]"
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource":
        inner = block.get("resource")
        inner = inner if isinstance(inner, dict) else {}
        body = inner.get("text")
        if body is None:
            body = f"[{_media(inner.get('mimeType'), inner.get('blob'))}]"
        return f"[resource {inner.get('uri')}]\n{body}"
    if kind == "resource_link":
        name, mime = block.get("name"), block.get("mimeType")
        extra = f" ({name}{f', {mime}' if mime else ''})"
        return f"[link {block.get('uri')}{extra if name else ''}]"
    if kind in ("image", "audio"):
        return f"[{kind} {_media(block.get('mimeType'), block.get('data'))}]"
    return f"[{kind} content]"


def _media(mime: object, data: object) -> str:
    """``image/png, 12,345 bytes``: the size of what base64 ``data`` decodes to."""
    kind = mime if isinstance(mime, str) and mime else "binary"
    if not isinstance(data, str):
        return kind
    size = len(data) * 3 // 4 - data.endswith("=") - data.endswith("==")
    return f"{kind}, {size:,} bytes"


def add_commands(
    client_cmd: Callable[[str, str], argparse.ArgumentParser], client_for: ClientFor
) -> None:
    p = client_cmd("prompts", "list the aggregated prompts")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=lambda a: cmd_prompts(a, client_for))

    r = client_cmd("resources", "list the aggregated resources and resource templates")
    r.add_argument("--json", action="store_true", help=JSON_HELP)
    r.set_defaults(func=lambda a: cmd_resources(a, client_for))

    d = client_cmd("read", "read a resource: mcpd read URI")
    d.add_argument("uri", help="the resource's URI, as `mcpd resources` lists it")
    d.add_argument("--json", action="store_true", help="print the whole result as JSON")
    d.set_defaults(func=lambda a: cmd_read(a, client_for))

    g = client_cmd("prompt", 'get a prompt: mcpd prompt NAME \'{"arg": "value"}\'')
    g.add_argument("name", help="the prompt's name, as `mcpd prompts` lists it")
    g.add_argument(
        "arguments", nargs="?", default="{}", help="its arguments, a JSON object of strings"
    )
    g.add_argument("--json", action="store_true", help="print the whole result as JSON")
    g.set_defaults(func=lambda a: cmd_prompt(a, client_for))
