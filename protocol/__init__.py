"""protocol: mcpd's sans-IO core, bytes and messages in, messages and bytes out; it does
no I/O and imports nothing of mcpd's or the transports'. In rooms: lines and their
framing (lines/), JSON-RPC (jsonrpc/), MCP's messages (mcp/), HTTP's parts and the
event stream (http/), OAuth (oauth/), what people read (shown/), how much may happen
now (pacing/), and Linux's word on who holds a socket (linux/)."""
