"""Upstream: one supervised runner per configured server (``supervisor``), seen by the
agent side as one (``all_servers``, with ``shared`` the values that cross between them),
and ``mcpd auth``'s logins (``auth_commands``). The rest lives in rooms: a call's way
(``calling``), the circuit breaker (``circuit``), a server's answers (``results``), its
life (``life``), its session (``connected``), its lists (``lists``), what it asks back
(``asking``), its state as shown (``status``) and its OAuth (``oauth``). Nothing here
knows about agents."""
