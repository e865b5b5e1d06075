"""A server's circuit breaker: its states, how it moves between them, and how long an
open circuit waits before its probe."""
