"""A stdio server's sandbox: what it is started in.

The plan decides without I/O, from values: ``plan`` (bubblewrap's and prlimit's
arguments), ``mounts`` (the filesystems a sandbox makes of its own), ``strict_view``
(whether a strict sandbox shows what a start needs), ``fixed_dirs``, ``limits`` and
``machine`` (what the host offers, as a value). The host side finds those values:
``host`` (probing the machine, resolving a sandbox's paths), ``anchors``,
``hidden_links`` and ``secret_folders`` (what is hidden, and where it is now),
``opened`` (what the kernel opens to run a command). ``confined``, ``keyring_filter``
and ``landlock`` put the thread that starts a sandboxed server under what the server is
born in.

The plan is not MCP: it says how a process is confined, not what is said to it, so it
lives here beside what carries it out rather than in ``protocol``."""
