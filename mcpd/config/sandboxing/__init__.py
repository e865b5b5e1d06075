"""Each stdio server's sandbox as the config gives it: its keys, the credential stores
and state it hides, and the links on the way to them."""
