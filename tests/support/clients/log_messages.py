"""A shared server's log messages as a legacy agent is told them: the logging server
tests run, a secret its calls carry, and the search for a message among what an
agent was told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.clients.agent import Agent

LOGGING = str(Path(__file__).parents[1] / "servers" / "logging_server.py")
SECRET = "sk-owner-only-7f3a9c"


async def log_message(agent: Agent, start: int, words: str) -> tuple[dict[str, Any], int]:
    """The first log message from the ``start``-th notification on whose data holds
    ``words``, and where the next search starts."""
    at = start
    while True:
        msg = (await agent.wait_notifications(at + 1))[at]
        at += 1
        if msg["method"] == "notifications/message" and words in json.dumps(msg["params"]):
            return msg["params"], at
