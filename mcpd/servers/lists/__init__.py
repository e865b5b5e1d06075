"""A server's lists: its tools page by page and the shape hosts need of them, its
prompts, resources and templates, and keeping each current."""
