"""mcpd as a service of the machine: systemd (readiness, watchdog, socket activation, a
child's environment) and its logging, to journald or as lines, rate limited."""
