"""The configuration: its tables as typed structs (``tables``), reading a file into them
(``loading``), the checks beyond their types (``checks``), the secrets a config holds
(``credentials``), each stdio server's sandbox (``sandboxing``), and other hosts'
configs read as mcpd's (``importing``)."""
