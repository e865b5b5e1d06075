"""What mcpd keeps on this machine and needs of it: the state directory and its
private files, systemd (readiness, watchdog, socket activation), journald."""
