"""The state directory and what mcpd keeps in it: the directory made private and locked
for one daemon, files replaced whole and written at a pace, those that cannot be
written now, the servers' last known state, the endpoint's token and OAuth logins."""
