"""The aggregated resources and the ``mcpd://`` scheme: which server a URI goes to, the
templates that may claim it, and in which form agents are handed each."""
