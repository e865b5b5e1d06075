"""The secrets a config holds: those read from files, every value mcpd must never show,
and those written where others can read them."""
