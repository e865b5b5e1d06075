"""Honest stdio MCP servers shaped for one test each, run as children of the daemon or of a
transport: scripted, canned, slow, deaf, changing, counting their starts."""
