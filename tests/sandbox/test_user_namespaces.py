"""A sandboxed server may not make user namespaces of its own. In one it would hold the
rights to mount a cgroup filesystem afresh, whose root is the cgroup mcpd runs in, and
whose files are its to write wherever they are mcpd's user's (as root, or under
``systemd --user``): ``cgroup.freeze`` would stop mcpd and every server until root
thawed them, ``cgroup.kill`` would end them all. At every sandboxed level, with a
network of its own and with host loopback ports too, whether mcpd runs as root or as
an ordinary user, the attempt fails; without a sandbox it succeeds, which shows what
the sandbox stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    as_ordinary_user,
    hostile,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("ordinary", [False, True], ids=["as-run", "as-ordinary-user"])
async def test_no_sandboxed_server_may_make_a_user_namespace(
    tmp_path: Path, ordinary: bool
) -> None:
    strict = {"sandbox": "strict", "read": RUNTIME}
    servers = {
        "hostile": hostile(),
        "strict": hostile(**strict),
        "offline": hostile(**strict, network=False),
        "relayed": hostile(network=False, host_loopback=[9]),
        "open": hostile(sandbox="off"),
        "steady": steady(),
    }
    sandboxed = ("hostile", "strict", "offline", "relayed")
    wrap = as_ordinary_user() if ordinary else ()
    with serving(tmp_path, servers, wrap=wrap) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            before = await d.status()
            for alias in sandboxed:
                assert before[alias]["sandbox"]["unprotected"] is None, before[alias]
                got = text(await agent.call(f"mcp__{alias}__make_user_namespace", {}))
                assert got.startswith("refused: ") and "unshare" in got, (alias, got)
            got = text(await agent.call("mcp__open__make_user_namespace", {}))
            assert got == "ok: made a user namespace", got
            await untouched(d, agent, before)
