"""Servers that ask back, seen from the agents' side: the rounds of a request, in both eras."""
