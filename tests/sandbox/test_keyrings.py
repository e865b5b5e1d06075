"""A sandboxed server may not use the kernel's keyrings, which no namespace separates.
mcpd runs here with a key in the session keyring it was started with, as a login's or
a user manager's holds passwords and Kerberos tickets: no sandboxed server reads it, at
any level, with host loopback ports too, whether mcpd runs as root or as an ordinary
user, and a key one server would add reaches neither mcpd's keyring nor another
server. Without a sandbox the server reads the key, which shows what the sandbox
stopped."""

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
from tests.support.system import keyrings

pytestmark = pytest.mark.timeout(120)

KEY = "mcpd-test:session"
SECRET = "session-keyring-secret-5150"
PLANTED = "mcpd-test:planted"


@pytest.fixture(autouse=True)
def _keyrings_known() -> None:
    if not keyrings.KNOWN:
        pytest.skip("the keyrings' system calls are not known on this machine")


@pytest.mark.parametrize("ordinary", [False, True], ids=["as-run", "as-ordinary-user"])
async def test_no_sandboxed_server_reads_or_adds_keys_of_mcpds_session_keyring(
    tmp_path: Path, ordinary: bool
) -> None:
    servers = {
        "hostile": hostile(),
        "strict": hostile(sandbox="strict", read=RUNTIME),
        "relayed": hostile(network=False, host_loopback=[9]),
        "open": hostile(sandbox="off"),
        "steady": steady(),
    }
    sandboxed = ("hostile", "strict", "relayed")
    wrap = keyrings.with_session_key(KEY, SECRET)
    wrap += as_ordinary_user() if ordinary else ()
    with serving(tmp_path, servers, wrap=wrap) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            before = await d.status()
            got = text(await agent.call("mcp__open__session_key", {"description": KEY}))
            assert got == f"ok: read {SECRET}", got
            for alias in sandboxed:
                assert before[alias]["sandbox"]["unprotected"] is None, before[alias]
                got = text(await agent.call(f"mcp__{alias}__session_key", {"description": KEY}))
                assert got.startswith("refused: ") and SECRET not in got, (alias, got)
            planted = {"description": PLANTED, "payload": "from-hostile"}
            got = text(await agent.call("mcp__hostile__add_session_key", planted))
            assert got.startswith("refused: "), got
            for alias in ("strict", "relayed", "open"):
                arguments = {"description": PLANTED}
                got = text(await agent.call(f"mcp__{alias}__session_key", arguments))
                assert got.startswith("refused: ") and "from-hostile" not in got, (alias, got)
            await untouched(d, agent, before)
