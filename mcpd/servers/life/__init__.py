"""One server's life: its runner and its parts, how it is reached and started (lazily
or not), its restarts' backoff, its downtime and the journal lines it leaves."""
