"""Servers that answer with tasks or ask back (input_required, elicitation, sampling), for the
tests of rounds between an agent, mcpd and a server."""
