"""mcpd's commands run as a person runs them: at a terminal of their own, in this process, or as
processes against a daemon's socket."""
