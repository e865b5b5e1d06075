"""Downstream: what agents talk to. At the top, the Unix socket's MCP server in both eras
as the daemon wires it (``api``), what it may ask of the rest of the daemon
(``backend``), an agent as its calls know it (``agent``) and profiles; in rooms of their
own: who may connect and how (``entry``), one connection's reading and writing
(``connection``), prompts, resources and the other methods (``beyond_tools``), HTTP
(``http``), tools/call (``calls``), servers that ask back (``askback``), tasks
(``tasks``), listings (``lists``), what comes unasked (``news``), mcpd's own methods
(``own_methods``), the bridge (``bridge``) and the status page (``page``)."""
