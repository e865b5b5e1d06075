"""Keeping mcpd's secrets out of what servers send on and what people are shown: the
guard, the masking, well-known credential formats, a secret cut short, and the
spellings JSON gives a text."""
