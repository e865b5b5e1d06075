"""Downstream: what agents talk to. The Unix socket's MCP server in both eras, one
connection per agent, peer checks, profiles, prompts and resources; in rooms of their
own: HTTP (``http``), tools/call (``calls``), servers that ask back (``askback``),
tasks (``tasks``), listings (``lists``), what comes unasked (``news``), mcpd's own
methods (``own_methods``), the bridge (``bridge``) and the status page (``page``)."""
