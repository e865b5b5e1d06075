"""tools/call on the agent side: routed, decided on, recorded, and its result as agents get it."""
