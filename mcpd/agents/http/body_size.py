"""How large a request's body the agent side's HTTP reads: apart from the wire, so
that what must fit in one (a token of mcpd's an agent sends back) is bounded by it
without h11."""

from __future__ import annotations

from typing import Final

MAX_BODY: Final = 4 * 1024 * 1024
