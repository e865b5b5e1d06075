"""What one profile's agents see of the tables: its view, the patterns it holds items
to, and the search over its tools."""
