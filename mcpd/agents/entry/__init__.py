"""Who may connect and how: the agent sockets bound and served, who holds the other end
and whether it is let in, how many connections there are room for, who an agent is for
the policy, and how mcpd's own clients reach the daemon."""
