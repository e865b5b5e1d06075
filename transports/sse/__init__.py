"""The HTTP+SSE transport of MCP 2024-11-05, and telling it from Streamable HTTP."""
