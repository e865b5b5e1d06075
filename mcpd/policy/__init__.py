"""Who may call what: the ``[[policy]]`` rules and their decision, rate limits, the
approvals that wait for a person, what an agent's user is asked, and the masking of
mcpd's secrets in what people are shown."""
