"""Servers that reach beyond their place: the host's files, sockets, loopback and memory, and
the places mcpd means to take."""
