"""The agent side's HTTP: on the agent sockets and the TCP endpoint, from the wire to ``/mcp``."""
