"""The host around mcpd in tests: processes, another user, ACLs, keyrings, SysV memory,
journald, the sandbox's bubblewrap and files kept private, and what a test does on a
machine where it cannot run."""
