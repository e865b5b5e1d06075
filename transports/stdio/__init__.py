"""The stdio transport: a server run as a child process, spoken to in lines.

The transport itself is here: ``transport`` (the lines to and from the server), with
``call_lines`` (its calls, written as its stdin has room), ``server_requests`` (what
the server asks mcpd, answered on its stdin) and ``params`` (what it is given from its
server's configuration). What the server writes on stdout is cut into lines and
dispatched without I/O, by ``protocol.lines.stdout``. Its rooms:

- ``process``: the child process, started so that it dies with mcpd, its environment,
  its stderr, why it ended, and the processes it left behind;
- ``sandbox``: what the child is started in: the plan (bubblewrap's and prlimit's
  arguments, decided without I/O from values), what the machine offers it and where
  its hidden paths are, and the kernel's confinement of the thread that starts it;
- ``loopback``: a sandboxed server's grant of host loopback ports: its network
  namespace and mcpd's relay to the host.
"""
