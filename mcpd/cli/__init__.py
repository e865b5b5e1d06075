"""The ``mcpd`` command: its subcommands, the blocking client they use, and the
rendering of status for people."""

from .main import main

__all__ = ["main"]
