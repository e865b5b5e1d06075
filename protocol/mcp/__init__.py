"""MCP's messages for both eras: the core of a session and its tools, the features beyond
tools (prompts, resources, completions, what servers ask, tasks), what a server says of
itself as a session opens, the server side of the lifecycle, a server's log messages,
and resource URIs: templates matched and the spellings a server reads as one URI."""
