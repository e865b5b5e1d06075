"""mcpd's own methods on its sockets (mcpd/...): the daemon's, the profiles' and its commands'."""
