"""How the tables name what servers offer: a local name spelled from the alias and the
template, names shared by several tools, and the names agents cannot tell apart."""
