"""mcpd running for a test: as systemd or an operator starts it, in a process of its own, with a
server set up for one story, or a stand-in for it."""
