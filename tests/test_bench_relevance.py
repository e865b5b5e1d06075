"""The benchmark's reading of the tool list mcpd serves (``GET /tools``) into the
search index's documents: mcpd's own notes cut off, any shape of tool taken."""

from __future__ import annotations

import json

import msgspec

from bench.relevance import listed_doc
from mcpd.config.tables.model import NamingConfig
from mcpd.registry.profiles.search import ToolDoc
from mcpd.registry.tables.catalog import Catalog
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


def test_a_listed_tool_of_any_shape_makes_a_document() -> None:
    assert listed_doc({}) == ToolDoc(name="", server="")
    odd = listed_doc(
        {"name": "n", "_meta": "nope", "inputSchema": [1], "title": 5, "description": None}
    )
    assert odd == ToolDoc(name="n", server="", title="5")


def test_only_mcpds_own_notes_are_cut_from_a_listed_description() -> None:
    listed = {"name": "mcp__s__t", "_meta": {"mcpd/server": "s"}}
    cut = listed_doc({**listed, "description": "[held: x] [s] Does [s] things."})
    assert cut.description == "Does [s] things."
    # A description that only mentions the server later keeps all its words.
    kept = listed_doc({**listed, "description": "Use [s] for it."})
    assert kept.description == "Use [s] for it."


def test_a_listed_document_reads_the_registry_listing_outage_and_all() -> None:
    registry = Catalog(NamingConfig())
    raw = {
        "name": "search",
        "title": "Ticket search",
        "description": "Search tickets.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
    registry.update("tickets", [msgspec.json.decode(json.dumps(raw).encode(), type=mcp.Tool)])
    marker = "unavailable: tickets is down since 19:09:42, retrying at 19:09:44"
    registry.set_availability("tickets", False, marker)
    listed = msgspec.json.decode(rpc.encode(registry.listing()[0]))
    assert listed["description"].startswith(f"[{marker}] [tickets]")  # the shape read here
    got = listed_doc(listed)
    assert got == ToolDoc(
        name="mcp__tickets__search",
        server="tickets",
        original="search",
        title="Ticket search",
        description="Search tickets.",
        input_schema=raw["inputSchema"],
    )
    # An outage does not move a tool in the ranking: the index sees the same text.
    registry.set_availability("tickets", True, None)
    assert listed_doc(msgspec.json.decode(rpc.encode(registry.listing()[0]))) == got
