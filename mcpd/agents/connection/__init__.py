"""One agent connection's reading and writing: its lines read and dispatched, its replies
and notifications written in order (long ones piece by piece, batches answered whole),
what it has in flight and how it ends, and what it did wrong or made fail."""
