"""The daemon's long-lived heap, kept out of the cyclic garbage collector's way.

What the daemon builds as it starts (modules, the config, every server's tools in the
registry) lives as long as the daemon does, yet each full collection walked all of it
again, and on the path of a tool call: the collector runs when enough objects were
made, and a call makes a few. Once the daemon is up, that heap is frozen (moved where
collections do not look), so they walk only what was made since.

A reload drops servers and tools that may sit in reference cycles; frozen, they would
never be freed. So a reload unfreezes, collects once (a pause of milliseconds, tens
with thousands of tools) and freezes what is left.
"""

from __future__ import annotations

import gc


def settle(collect: bool = False) -> None:
    """Freeze what is alive now; with ``collect``, free frozen garbage first."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
