"""A record of every call: what it was, who made it, what the policy decided and what
came of it, in a rotated file in the state directory, the journal and the metrics."""
