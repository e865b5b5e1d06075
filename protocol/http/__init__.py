"""HTTP as MCP uses it, on values alone: URLs, header values and a reply's head, the
headers a Streamable HTTP request mirrors from its body, and the event stream."""
