"""Logins in a person's browser: ``mcpd auth`` (OAuth logins for the daemon's HTTP servers,
and what a logout revoked), ``mcpd dashboard`` (the status page's), and opening the page."""
