"""A server that points its own grant at ``/proc`` or ``/dev`` and exits is not started
again with the host's bound over its sandbox's own: it does not see mcpd's process
nor the host's shared memory, its start is refused naming the grant and where it now
leads, in ``mcpd status`` and the journal, and every other server goes on answering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    agent_of,
    call,
    hostile,
    serving,
    started_again,
    steady,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


def linked_notes(tmp_path: Path) -> Path:
    """The user's notes, a link to where they are kept."""
    notes = tmp_path / "home" / "notes"
    (tmp_path / "data" / "notes").mkdir(parents=True)
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.symlink_to(tmp_path / "data" / "notes")
    return notes


@pytest.mark.parametrize("kernel", ["/proc", "/proc/sys", "/dev"])
async def test_a_grant_repointed_into_the_kernels_filesystems_is_not_bound(
    tmp_path: Path, kernel: str
) -> None:
    notes = linked_notes(tmp_path)
    shared = Path("/dev/shm") / f"mcpd-test-host-{os.getpid()}"
    shared.write_text("the host's shared memory\n")
    servers = {"hostile": hostile(write=[str(notes)]), "steady": steady()}
    try:
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile", "steady")
                got = await call(agent, "hostile", "relink", path=str(notes), to=kernel)
                assert got.startswith("ok:"), got
                row = await started_again(d, agent, "hostile")
                if row["state"] in ("ready", "degraded"):
                    for seen in (f"/proc/{d.pid}/cmdline", str(shared)):
                        got = await call(agent, "hostile", "read_file", path=seen)
                        assert not got.startswith("ok:"), (seen, got)
                said: str = row["last_error"] or ""
                real = os.path.realpath(kernel)
                lead = f"servers.hostile.write[0]: {notes} leads to {real}, which "
                assert lead in said, said
                assert "the kernel's" in said, said
                assert lead in await d.logged(lead)
                assert await call(agent, "steady", "tool0", text="a") == "tool0:a"
    finally:
        shared.unlink()
