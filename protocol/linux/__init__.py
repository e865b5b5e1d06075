"""What Linux says of a TCP socket on this machine, read from its ``/proc`` tables or
asked of it over netlink: which local user holds the other end of a connection."""
