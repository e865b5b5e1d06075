"""What mcpd keeps on this machine and needs of it. At the top, the daemon's heap kept from
the collector (``heap``) and Prometheus' text format (``prometheus``); in rooms of their
own: the state directory and its private files, written whole and paced (``state``), the
pins on disk (``pins``), whose files, processes and ports mcpd trusts or finds
(``ownership``), and systemd and journald (``service``)."""
