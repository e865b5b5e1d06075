"""The gate between what a server lists and what agents are shown: each list's limits,
what is kept of each item judged, and what the journal is told of it."""
