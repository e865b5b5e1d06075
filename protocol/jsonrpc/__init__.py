"""JSON-RPC 2.0 as MCP uses it: the messages and error codes, a line read from its
envelope, the replies that fail only the request they answered, a long result written
in pieces, and the tools/call splice built around the bytes a call carries."""
