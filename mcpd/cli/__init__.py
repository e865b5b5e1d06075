"""The ``mcpd`` command. At the top, its grammar (``main``), the blocking client its
commands use, its exit codes, and the commands that ask the daemon or work from the
config; in rooms of their own: the config entries of MCP hosts, merged in by ``mcpd
connect`` and read by ``mcpd import`` (``hosts``), logins in a browser, OAuth's and the
status page's (``logins``), and the pins commands (``pins``)."""

from .main import main

__all__ = ["main"]
