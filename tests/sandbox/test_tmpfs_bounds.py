"""What a sandboxed server writes into the filesystems its sandbox keeps in memory is
bounded. Such files are memory that no limit of the server's counts (the kernel's
out-of-memory killer picks other processes first) and that stays until the server
stops. The two a program writes to by design, ``/dev/shm`` and a strict sandbox's
``/tmp``, hold no more than the server's memory limit, past which a write fails with
"No space left on device"; the others (``/dev`` itself, the empty directories that
cover what is hidden, a strict sandbox's root) are read-only, so that the server
cannot make them its own. ``/dev/null``, pseudo-terminals and POSIX shared memory
work as before."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    call,
    hoarding,
    serving,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

LIMIT_MIB = 64
LIMITS = {"memory": f"{LIMIT_MIB}M"}


def written_before_full(got: str) -> int:
    """The MiB a fill wrote before the filesystem was full."""
    full = r"refused: OSError: \[Errno 28\] No space left on device after (\d+) MiB"
    found = re.fullmatch(full, got)
    assert found is not None, got
    return int(found[1])


async def test_a_sandboxed_servers_memory_filesystems_hold_no_more_than_its_memory_limit(
    tmp_path: Path,
) -> None:
    servers = {
        "plain": hoarding(limits=LIMITS),
        "strict": hoarding(sandbox="strict", read=RUNTIME, limits=LIMITS),
    }
    bounded = {"plain": ["/dev/shm"], "strict": ["/dev/shm", "/tmp"]}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            for alias, places in bounded.items():
                for place in places:
                    got = await call(agent, alias, "fill", path=f"{place}/fill", mib=2 * LIMIT_MIB)
                    # Up to the limit, and not a byte past it.
                    assert LIMIT_MIB - 4 <= written_before_full(got) <= LIMIT_MIB, (alias, got)
                    # What it wrote went with the file: the room is there again.
                    got = await call(agent, alias, "fill", path=f"{place}/fill", mib=8)
                    assert got == "ok: wrote 8 MiB", (alias, got)


async def test_the_rest_of_a_sandboxed_servers_memory_filesystems_is_read_only(
    tmp_path: Path,
) -> None:
    servers = {
        "plain": hoarding(limits=LIMITS),
        "strict": hoarding(sandbox="strict", read=RUNTIME, limits=LIMITS),
    }
    with serving(tmp_path, servers) as d:
        hidden = os.path.realpath(tmp_path / "state")  # mcpd's state directory
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            refused = {"plain": ["/dev", hidden], "strict": ["/dev", "/"]}
            for alias, places in refused.items():
                for place in places:
                    got = await call(agent, alias, "open_up", path=place)
                    assert got.endswith("Read-only file system: " + repr(place)), (alias, got)
                    got = await call(agent, alias, "fill", path=f"{place.rstrip('/')}/fill", mib=8)
                    assert "Read-only file system" in got, (alias, got)
                # What a program there needs from them still works.
                assert await call(agent, alias, "create", path="/dev/null") == "ok: wrote /dev/null"
                assert await call(agent, alias, "pty") == "ok: read through"
                got = await call(agent, alias, "posix_shm")
                assert got.startswith("ok: read held! through /hoarding-"), (alias, got)
