"""A template respelled after it was approved (its scheme's case, a ``file`` URI's
``localhost``) is held as a change of the approved one, since a server reads the same
URIs through it: through a running daemon, the URIs agents learned under the approved
spelling are held with it, however an agent spells them and whichever way it asks
(either era, the socket's HTTP route, the ``mcpd://`` form, a subscription), and
the server is not asked; a template left as it was is read as before."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.agent import META, connect, running
from tests.support.daemon_http import stateless
from tests.support.pins_daemon import (
    HELD,
    Changing,
    cli,
    config,
    listen,
    relist,
)

FILES = {"uriTemplate": "file:///data/{+path}", "name": "files", "description": "Files."}
NOTES = {"uriTemplate": "notes://{id}", "name": "notes", "description": "Notes."}
TICKETS = {"uriTemplate": "tickets://{id}", "name": "ticket", "description": "A ticket."}
RESPELLED = [
    {**FILES, "uriTemplate": "file://localhost/data/{+path}"},
    {**NOTES, "uriTemplate": "NOTES://{id}"},
    TICKETS,
]
# Each names a URI only a held template reads, as a server reads it.
HELD_URIS = [
    "file:///data/secret",
    "FILE:///data/secret",
    "file://LOCALHOST/data/secret",
    "file:/data/secret",
    "notes://1",
    "Notes://1",
    "mcpd://tickets/file:///data/secret",
    "mcpd://tickets/notes://1",
]
RESOURCES_CHANGED = ("notifications/resources/list_changed",)


async def test_a_respelled_template_holds_the_uris_it_was_approved_for(tmp_path: Path) -> None:
    server = Changing(tmp_path)
    server.write({"resourceTemplates": [FILES, NOTES, TICKETS]})
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
                    answer = await stateless(sock, "resources/read", {"uri": uri}, META, uri)
                    assert HELD in answer["error"]["message"], (uri, answer)
                assert await listen(modern, HELD_URIS) == []
                assert server.reached() == before, "a held template's URI reached the server"

                # The template that was not respelled is read as it was.
                read = await legacy.rpc("resources/read", {"uri": "tickets://5"})
                assert read["result"]["contents"][0]["text"] == "read tickets://5"

                code, _out, err = await cli(sock, "approve", "tickets", "--yes")
                assert code == 0, err
                read = await legacy.rpc("resources/read", {"uri": "file:///data/secret"})
                assert read["result"]["contents"][0]["text"] == "read file:///data/secret"
