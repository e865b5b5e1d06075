"""A stdio server's process: started from the thread running trio (or taken from those
started before the event loop) so that it dies with mcpd, given the environment its
config lets it have, held to a pids cgroup when mcpd is root, stopped with its process
group and the descendants that left it; its stderr logged, and why it ended said in
words. Only ``child``, ``lifecycle``, ``stderr`` and ``strays`` use trio; the rest run
before the event loop too (``early``)."""
