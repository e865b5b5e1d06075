"""A call's way to its server and back: the ``Call`` and its outcome, its scheduler's
turns, queue bytes and deadlines, how it is written for the server, and what a call
that got no result comes to."""
