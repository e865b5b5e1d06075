"""The walk that drops mcpd's keys from a reply (``registry.text.own_keys.drop_from_meta``),
held: which thread ran it is noted, and it waits until the test lets it go. A test
that holds it can tell, by what happens meanwhile, whether taking a reply apart held
the event loop."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcpd.registry.text import own_keys


class Held:
    def __init__(self, patience: float) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []
        self._patience = patience
        self._drop = own_keys.drop_from_meta

    def __call__(self, value: Any) -> bool:
        self.threads.append(threading.get_ident())
        self.entered.set()
        # Bounded: a test whose event loop it holds fails, rather than hangs.
        self.release.wait(self._patience)
        return self._drop(value)


def hold(monkeypatch: pytest.MonkeyPatch) -> Held:
    """The walk held, for the test that ``monkeypatch`` belongs to (which lets it go
    when it ends: ``release.set()``)."""
    walk = Held(patience=10.0)
    monkeypatch.setattr(own_keys, "drop_from_meta", walk)
    return walk
