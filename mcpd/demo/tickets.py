"""The tickets demo server: an in-memory ticket tracker.

    python -m mcpd.demo.tickets                                    # stdio
    python -m mcpd.demo.tickets --http 127.0.0.1:0 --ready-file F  # Streamable HTTP

Its ``search`` has the same name as the notes server's on purpose: a client that
aggregates both has to tell them apart. ``search`` reports progress once before it
answers when the request carries a ``progressToken`` (over HTTP that turns the
response into an event stream). ``search`` and ``get_ticket`` claim
``readOnlyHint``; whether to believe that is the client's business.
"""

from __future__ import annotations

import sys

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from .arguments import string_argument
from .main import run_demo
from .runtime import DemoServer, ToolContext, ToolError, object_schema

PRIORITIES = ("low", "normal", "high")
STATUSES = ("open", "closed")


class Ticket(msgspec.Struct):
    id: str
    title: str
    body: str
    status: str = "open"
    priority: str = "normal"

    def line(self) -> str:
        return f"{self.id} [{self.status}, {self.priority}] {self.title}"


def seed() -> list[Ticket]:
    return [
        Ticket("T-1", "Login page times out", "Users on the VPN wait 30 s, then see a 504."),
        Ticket("T-2", "Export to CSV drops the header row", "Seen in 2.3 and 2.4.", "closed"),
        Ticket("T-3", "Search ignores accents", "Searching 'cafe' does not find 'café'.", "open"),
        Ticket("T-4", "Dark mode contrast", "Grey on grey in the settings page.", "open", "low"),
        Ticket("T-5", "Nightly backup failed twice", "Disk full on backup-2.", "open", "high"),
    ]


def build_tickets() -> DemoServer:
    tickets = {t.id: t for t in seed()}
    server = DemoServer(
        "tickets",
        instructions="Find tickets with `search`, open one with `get_ticket`.",
    )
    read_only = {"readOnlyHint": True, "openWorldHint": False}

    @server.tool(
        "Search tickets by words in their title or body (case-insensitive); "
        "optionally only open or closed ones.",
        object_schema(
            {
                "query": {"type": "string", "description": "words to find; empty lists all"},
                "status": {"type": "string", "enum": list(STATUSES)},
            },
            ["query"],
        ),
        annotations=read_only,
    )
    async def search(args: rpc.JsonObject, ctx: ToolContext) -> str:
        asked = string_argument(args, "query")
        words = asked.lower().split()
        found = [
            t
            for t in tickets.values()
            if all(w in f"{t.title} {t.body}".lower() for w in words)
            and args.get("status", t.status) == t.status
        ]
        await ctx.progress(len(tickets), len(tickets), f"searched {len(tickets)} tickets")
        if not found:
            return f"No tickets match {asked!r}."
        return "\n".join(t.line() for t in found)

    @server.tool(
        "Show one ticket with its full description.",
        object_schema({"id": {"type": "string", "description": "e.g. T-1"}}, ["id"]),
        annotations=read_only,
    )
    async def get_ticket(args: rpc.JsonObject, ctx: ToolContext) -> mcp.CallToolResult:
        asked = string_argument(args, "id")
        ticket = tickets.get(asked)
        if ticket is None:
            raise ToolError(f"No ticket {asked!r}")
        return mcp.CallToolResult(
            content=[mcp.TextContent(f"{ticket.line()}\n\n{ticket.body}")],
            structuredContent=msgspec.to_builtins(ticket),
        )

    @server.tool(
        "Open a new ticket and return its id.",
        object_schema(
            {
                "title": {"type": "string", "minLength": 1},
                "body": {"type": "string"},
                "priority": {"type": "string", "enum": list(PRIORITIES), "default": "normal"},
            },
            ["title"],
        ),
        annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
    )
    async def create_ticket(args: rpc.JsonObject, ctx: ToolContext) -> str:
        ticket = Ticket(
            id=f"T-{len(tickets) + 1}",
            title=string_argument(args, "title"),
            body=string_argument(args, "body", ""),
            priority=string_argument(args, "priority", "normal"),
        )
        tickets[ticket.id] = ticket
        return f"Created {ticket.line()}"

    return server


def main(argv: list[str] | None = None) -> None:
    run_demo(build_tickets(), argv)


if __name__ == "__main__":
    main(sys.argv[1:])
