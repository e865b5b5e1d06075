"""A server's answers as agents get them: its results and its JSON-RPC errors, masked,
stripped of mcpd's own keys, and taken apart to fit."""
