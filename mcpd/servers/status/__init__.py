"""A server's state as people and models see it: its state and ``mcpd status`` row, an
outage as a model reads it, its latency, its recent history and its metrics."""
