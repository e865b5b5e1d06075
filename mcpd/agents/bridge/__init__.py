"""``mcpd bridge``: the stdio MCP server that relays a host's session to the daemon's socket."""
