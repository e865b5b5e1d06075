"""Other people's programs around mcpd: hosts' config entries, real third-party agents and
servers, relays and probes for them, and what they send."""
