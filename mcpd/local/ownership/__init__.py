"""Whose files, processes and ports they are: the users mcpd trusts, whether another user
could have written a file, who holds a TCP connection's other end, and who listens on a
port mcpd could not take."""
