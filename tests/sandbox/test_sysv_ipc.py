"""SysV IPC is not shared with a sandboxed server. Another program of the user keeps
shared memory there (an X server's MIT-SHM buffers, PostgreSQL's), which its user may
list, read and remove; and what a server makes there would stay after it and mcpd,
held in no limit of its own, and be found by any other server under its key. At every
sandboxed level a server sees none of the host's segments, reaches none by its id or
key, and what it makes is its own: no other server finds it, the host never lists it,
and a server started afresh finds nothing of it. Without a sandbox the same calls
succeed, which shows what the sandbox stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    as_ordinary_user,
    call,
    hoarding,
    restarted,
    serving,
    wait_ready,
)
from tests.support.system import sysv

pytestmark = pytest.mark.timeout(120)

SANDBOXED = {
    "plain": hoarding(),
    "strict": hoarding(sandbox="strict", read=RUNTIME),
    "offline": hoarding(sandbox="strict", read=RUNTIME, network=False),
}
SECRET = "mit-shm-buffer-of-another-program"


@pytest.mark.parametrize("ordinary", [False, True], ids=["as-run", "as-ordinary-user"])
async def test_a_sandboxed_server_reaches_no_segment_made_outside_it(
    tmp_path: Path, ordinary: bool
) -> None:
    servers = {**SANDBOXED, "open": hoarding(sandbox="off")}
    wrap = as_ordinary_user() if ordinary else ()
    with sysv.holding(SECRET) as held, serving(tmp_path, servers, wrap=wrap) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            for alias in SANDBOXED:
                listed = await call(agent, alias, "segments")
                assert listed.startswith("ok: segments") and str(held.key) not in listed, alias
                for tool in ("attach", "remove"):
                    got = await call(agent, alias, tool, id=held.shmid)
                    assert got.startswith("refused: OSError: ") and "Invalid argument" in got, got
                got = await call(agent, alias, "find", key=held.key)
                assert got.startswith("refused: ") and "No such file" in got, (alias, got)
            # Still there, as its program left it.
            assert sysv.listed().get(held.key) == held.shmid
            # Without a sandbox, the user's segment is the server's to list and read.
            assert str(held.key) in await call(agent, "open", "segments")
            assert await call(agent, "open", "attach", id=held.shmid) == f"ok: read {SECRET}"


async def test_what_a_sandboxed_server_makes_in_sysv_ipc_is_its_own_and_goes_with_it(
    tmp_path: Path,
) -> None:
    key, queue = sysv.fresh_key(), sysv.fresh_key()
    servers = {**SANDBOXED, "open": hoarding(sandbox="off")}
    try:
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, *servers)
                got = await call(agent, "plain", "make", key=key, bytes=1 << 20)
                assert got.startswith("ok: made segment"), got
                assert (await call(agent, "plain", "make_queue", key=queue)).startswith("ok: ")
                # No other server finds it, sandboxed or not: it is in no namespace but
                # the server's own.
                for alias in ("strict", "offline", "open"):
                    got = await call(agent, alias, "find", key=key)
                    assert got.startswith("refused: ") and "No such file" in got, (alias, got)
                    got = await call(agent, alias, "find_queue", key=queue)
                    assert got.startswith("refused: ") and "No such file" in got, (alias, got)
                assert key not in sysv.listed() and queue not in sysv.queues()
                await restarted(d, agent, "plain")
                got = await call(agent, "plain", "find", key=key)
                assert got.startswith("refused: ") and "No such file" in got, got
                # Without a sandbox a segment outlives its server and mcpd.
                got = await call(agent, "open", "make", key=queue + 1, bytes=4096)
                assert got.startswith("ok: made segment"), got
        assert key not in sysv.listed() and queue not in sysv.queues()
        assert queue + 1 in sysv.listed()
    finally:
        sysv.remove_listed({key, queue, queue + 1})
