"""A server's text as mcpd passes it on: cleaned, marked and quoted as the server's,
without mcpd's own keys, in what it asks an agent as in what it lists."""
