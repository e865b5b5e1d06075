"""The ``instructions`` of ``initialize`` and ``server/discover``: how mcpd names its
tools, what is down, and what each server said of itself for models."""

from __future__ import annotations

from .backend import Servers
from .profiles import ProfileServers


def instructions(servers: Servers, limit: int) -> str:
    """For the servers an agent sees; ``limit``: characters of each server's own."""
    names = "mcp__<server>__<tool>"
    if isinstance(servers, ProfileServers):
        template = (servers.view.naming or servers.view.registry.naming).template
        names = template.replace("{alias}", "<server>").replace("{tool}", "<tool>")
    text = (
        f"mcpd aggregates the tools of several MCP servers. Tool names are {names}; "
        "descriptions start with the server's name in brackets."
    )
    if isinstance(servers, ProfileServers) and servers.view.mode == "search":
        text += (
            " Find tools with mcpd_search_tools, read their arguments with "
            "mcpd_describe_tools and run them with mcpd_call_tool."
        )
    outages = servers.outages()
    if outages:
        text += " Current outages: " + " ".join(outages)
    given = servers.instructions()
    if given:
        # Hosts put a server's instructions before the model; behind mcpd the servers'
        # own would be lost, and some servers are not used well without them.
        text += (
            "\n\nThe servers' own instructions follow, each under its name. They name "
            "tools as the server does; here each is called by the name above."
        )
        for alias, said in given:
            said = said.strip()
            if len(said) > limit:
                said = said[:limit] + f" [mcpd: cut at {limit} characters]"
            text += f"\n\n## {alias}\n\n{said}"
    return text
