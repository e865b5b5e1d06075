"""A template respelled after it was approved (its scheme's case, a ``file`` URI's
``localhost``) is held as a change of the approved one, since a server reads the same
URIs through it: through a running daemon, the URIs agents learned under the approved
spelling are held with it, however an agent spells them and whichever way it asks
(either era, the socket's HTTP route, the ``mcpd://`` form, a subscription), and
the server is not asked; a template left as it was is read as before, and so is
another host's URI. Once approved, every spelling is read."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import META, connect, running
from tests.support.clients.daemon_http import stateless
from tests.support.daemons.pins import (
    HELD,
    Changing,
    cli,
    config,
    listen,
    relist,
)

FILES = {"uriTemplate": "file:///data/{+path}", "name": "files", "description": "Files."}
WEB = {"uriTemplate": "http://example.com/doc/{id}", "name": "web", "description": "Web."}
NOTES = {"uriTemplate": "notes://{id}", "name": "notes", "description": "Notes."}
TICKETS = {"uriTemplate": "tickets://{id}", "name": "ticket", "description": "A ticket."}
RESPELLED = [
    {**FILES, "uriTemplate": "file://localhost/data/{+path}"},
    {**WEB, "uriTemplate": "HTTP://Example.com/doc/{id}"},
    {**NOTES, "uriTemplate": "NOTES://{id}"},
    TICKETS,
]
# Each names a URI only a held template reads, as a server reads it.
HELD_URIS = [
    "file:///data/secret",
    "FILE:///data/secret",
    "file://LOCALHOST/data/secret",
    "file:/data/secret",
    # Node's fileURLToPath and Python's urlparse read each as the path /data/secret,
    # and Python's urllib opens it.
    "file:///data/secret?x=1",
    "file://127.0.0.1/data/secret",
    "file://localhost./data/secret",
    # WHATWG's URL parser reads each as http://example.com/doc/1.
    "http://example.com/doc/1",
    "http://example.com:80/doc/1",
    "http://example.com:/doc/1",
    "http://u:p@example.com/doc/1",
    "http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com/doc/1",
    "http://example.com./doc/1",
    "http://example.com/doc/1?q",
    "notes://1",
    "Notes://1",
    "mcpd://tickets/file:///data/secret",
    "mcpd://tickets/notes://1",
    "mcpd://tickets/http://example.com:80/doc/1",
]
# Another host (its "p" a Cyrillic letter): not a URI the held template reads.
OTHER_HOST = "http://exam\u0440le.com/doc/1"
RESOURCES_CHANGED = ("notifications/resources/list_changed",)


async def test_a_respelled_template_holds_the_uris_it_was_approved_for(tmp_path: Path) -> None:
    server = Changing(tmp_path)
    server.write({"resourceTemplates": [FILES, WEB, NOTES, TICKETS]})
    cfg = config(tmp_path, {"tickets": server.config()})
    with trio.fail_after(90):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            async with (
                connect(sock, modern=False) as legacy,
                connect(sock) as modern,
            ):
                await legacy.initialize()
                server.write({"resourceTemplates": RESPELLED})
                await relist(modern, legacy, RESOURCES_CHANGED)
                before = server.reached()
                for uri in HELD_URIS:
                    for agent in (legacy, modern):
                        read = await agent.rpc("resources/read", {"uri": uri})
                        assert HELD in read["error"]["message"], (uri, agent.modern, read)
                    subscribed = await legacy.rpc("resources/subscribe", {"uri": uri})
                    assert HELD in subscribed["error"]["message"], (uri, subscribed)
                    if not uri.isascii():
                        continue  # no Mcp-Name header carries it over HTTP
                    answer = await stateless(sock, "resources/read", {"uri": uri}, META, uri)
                    assert HELD in answer["error"]["message"], (uri, answer)
                assert await listen(modern, HELD_URIS) == []
                assert server.reached() == before, "a held template's URI reached the server"

                # The template that was not respelled is read as it was, and another
                # host's URI reaches the server.
                for uri in ("tickets://5", OTHER_HOST):
                    read = await legacy.rpc("resources/read", {"uri": uri})
                    assert read["result"]["contents"][0]["text"] == f"read {uri}"

                code, _out, err = await cli(sock, "approve", "tickets", "--yes")
                assert code == 0, err
                for uri in HELD_URIS:
                    if uri.startswith("mcpd://") or uri.lower().startswith("notes:"):
                        continue
                    read = await legacy.rpc("resources/read", {"uri": uri})
                    assert read["result"]["contents"][0]["text"] == f"read {uri}", read
