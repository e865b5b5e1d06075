"""The config entries of MCP hosts: the entry each host needs to reach mcpd, merged with
care into its JSON or TOML file (``mcpd connect``), and the files ``mcpd import`` reads."""
