"""Calls that wait for a person: the approvals, what an agent's user is asked about
them, and approvals remembered for the rest of a connection."""
