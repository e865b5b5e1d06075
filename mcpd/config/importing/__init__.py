"""``mcpd import``: other hosts' MCP config files read, judged for secrets and written
as mcpd's TOML."""
