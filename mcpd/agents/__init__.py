"""Downstream: what agents talk to. The Unix socket's MCP server in both eras, one
connection per agent, HTTP on the same socket, the bridge, peer checks, routing of
tool calls and the shaping of their results."""
