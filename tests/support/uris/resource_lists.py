"""Resources and templates as a server lists them, a profile's sight of them, and what
agents are shown, for the tests of the resource table (``registry.uris.resources``) and of
its routes (``registry.uris.resource_routes``)."""

from __future__ import annotations

import json
from typing import Any

from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Sight
from protocol.mcp import features


class Shows(Sight):
    """A profile that shows some servers, and of them every URI but those hidden."""

    def __init__(self, *aliases: str, hidden: tuple[str, ...] = ()) -> None:
        self.aliases = set(aliases)
        self.hidden = set(hidden)

    def has_server(self, alias: str) -> bool:
        return alias in self.aliases

    def admits_resource(self, alias: str, uri: str) -> bool:
        return alias in self.aliases and uri not in self.hidden


def resources(*uris: str) -> list[features.Resource]:
    return [features.Resource(uri=u, name=u.rsplit("/", 1)[-1]) for u in uris]


def templates(*ts: str, description: str | None = None) -> list[features.ResourceTemplate]:
    return [features.ResourceTemplate(uriTemplate=t, name="t", description=description) for t in ts]


def listed(table: ResourceTable, sight: Sight | None = None) -> list[dict[str, Any]]:
    return [json.loads(bytes(r)) for r in table.listing(sight)]


def listed_templates(table: ResourceTable, sight: Sight | None = None) -> list[dict[str, Any]]:
    return [json.loads(bytes(r)) for r in table.template_listing(sight)]
