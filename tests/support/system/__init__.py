"""The host around mcpd in tests: processes, another user, ACLs, keyrings, SysV memory,
journald, the sandbox's bubblewrap and files kept private."""
