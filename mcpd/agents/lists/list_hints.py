"""The sentences mcpd ends an answer with to point an agent at the method that lists
what there is, when what it named is not there. The command line shows the same
answers to a person, for whom a method means nothing: it puts its own command in
each one's place (``mcpd.cli.exits.for_a_person``)."""

from __future__ import annotations

from typing import Final

from ...registry.naming.spelling import SEARCH_TOOL

LIST_TOOLS: Final = "Call tools/list for the current tools."
# Where tools/list holds the meta-tools, not the tools: searching finds them.
SEARCH_TOOLS: Final = f"Call {SEARCH_TOOL} to find the current tools."
LIST_RESOURCES: Final = "resources/list and resources/templates/list show what can be read."
# The ``_meta`` key of mcpd's answer to an unknown tool name: what it suggested.
UNKNOWN_TOOL: Final = "mcpd/unknownTool"
