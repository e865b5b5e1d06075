"""The tasks extension through mcpd: the agents' tasks, their methods, answers and watches."""
