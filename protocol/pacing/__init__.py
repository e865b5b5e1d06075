"""How much may happen now: token buckets, and how fast mcpd reads what one server sends
and how much of it it holds at once."""
