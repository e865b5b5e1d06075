"""The daemon's start: ``mcpd serve``, which runs it (``serve``), the stdio servers started
before the event loop is loaded (``prestart``), every socket agents reach mcpd on bound
before any server runs (``listening``), the agents' socket taken up or systemd's adopted
(``agents_listener``), who holds the endpoint's port when it is taken (``port_taken``),
systemd's socket held while the config cannot be loaded (``config_hold``), and the
daemon's reason not to start (``cannot_start``)."""
