"""Servers that misbehave in what they send: broken or unasked messages, texts that pose as
mcpd's, and secrets repeated where they should not be."""
