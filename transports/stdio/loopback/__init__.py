"""A sandboxed stdio server's grant of host loopback ports: the network namespace made
for it before it starts, holding mcpd's listeners (``netns``), and mcpd's relay of
each connection made to them to the same port on the host (``relay``)."""
