"""What the daemon needs of the machine it runs on: systemd (readiness, watchdog,
socket activation), journald, and the state directory."""
