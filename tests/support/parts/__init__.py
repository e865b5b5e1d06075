"""mcpd's parts driven in process, with stand-ins around them: a session's transport, a router,
a call's start, a health watch, samples of lists and names."""
