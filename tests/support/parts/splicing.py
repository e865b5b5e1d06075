"""Watching the tools/call splice from a test: which requests were built by it."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.jsonrpc import splice


def record_spliced_requests(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """From now on, each request line the splice builds appends its progress token
    (None: none) to the returned list."""
    built: list[str | None] = []
    request = splice.CallShape.request

    def recording(
        shape: splice.CallShape, rid: int, arguments: Any, token: str | None = None
    ) -> Any:
        built.append(token)
        return request(shape, rid, arguments, token)

    monkeypatch.setattr(splice.CallShape, "request", recording)
    return built
