"""A server's home is a private directory of mcpd's user in the state directory: one
that is a symbolic link (to the user's ``~/.ssh``, say, put there by whoever could
write the state directory before) keeps that server from starting, with the reason in
its status, and the other servers serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    HOSTILE,
    SSH_KEY,
    agent_of,
    hostile,
    serving,
    settled,
    steady,
    wait_ready,
)
from tests.support.system.procs import SCRIPTED

pytestmark = pytest.mark.timeout(120)


async def test_a_home_that_is_a_link_to_the_users_keys_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "state" / "homes").mkdir(parents=True, mode=0o700)
    home = tmp_path / "state" / "homes" / "hostile"
    home.symlink_to(tmp_path / "home" / ".ssh")
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            rows = await settled(d, "hostile")
            assert rows["hostile"]["state"] != "ready"
            said = rows["hostile"]["last_error"]
            assert f"{home} is a symbolic link, which mcpd never makes there" in said, said
        assert (tmp_path / "home" / ".ssh" / "id_ed25519").read_text() == SSH_KEY
        assert sorted(p.name for p in (tmp_path / "home" / ".ssh").iterdir()) == ["id_ed25519"]


async def test_an_alias_given_another_program_keeps_its_home_and_the_journal_says_so(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            config = d.config.read_text()
            d.config.write_text(config.replace(str(HOSTILE), str(SCRIPTED)))
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["hostile"], report
            log = await d.logged("home_kept")
            said = next(line for line in log.splitlines() if "home_kept" in line)
            assert "[hostile]" in said and "homes/hostile" in said, said
            # The same program again under its alias is no news.
            d.config.write_text(config.replace("[servers.steady]", "[servers.steady]\ncwd = '/'"))
            await agent.result("mcpd/reload")
            await wait_ready(agent, "hostile", "steady")
            assert "[steady] home_kept" not in d.log()
