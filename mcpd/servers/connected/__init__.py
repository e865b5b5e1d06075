"""A connected server: its session, the handshake that opens it, the ``Upstream`` its
requests go through, its health probes, its own requests' waits and its log messages."""
