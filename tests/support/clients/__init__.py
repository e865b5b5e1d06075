"""The agent's side: agents and connections that speak to a daemon's socket or endpoint, and
agents run as programs of their own."""
