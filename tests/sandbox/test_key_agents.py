"""The user's SSH agents are out of every sandboxed server's reach wherever they keep
their sockets by convention, whether or not mcpd's own environment names them: one
started in a shell (``eval $(ssh-agent)``, under ``/tmp/ssh-*``) while mcpd runs
under a service manager, and one started after mcpd, found when the next server
starts. A server without a sandbox reaches both, which shows the agents answer."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import agent_of, hostile, serving, text, wait_ready

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _no_key_agent_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # mcpd's environment names none
    monkeypatch.delenv("SSH_AGENT_PID", raising=False)


@contextlib.contextmanager
def ssh_agent(key: Path) -> Iterator[str]:
    """An ssh-agent started as a login shell starts one, holding ``key``: its socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSH_")}
    try:
        out = subprocess.run(["ssh-agent", "-s"], capture_output=True, text=True, env=env)
    except FileNotFoundError:
        pytest.skip("no ssh-agent here")
    sock = re.search(r"SSH_AUTH_SOCK=([^;]+);", out.stdout)
    pid = re.search(r"SSH_AGENT_PID=(\d+);", out.stdout)
    assert sock and pid, out
    try:
        env["SSH_AUTH_SOCK"] = sock.group(1)
        subprocess.run(["ssh-add", "-q", str(key)], check=True, env=env, capture_output=True)
        yield sock.group(1)
    finally:
        os.kill(int(pid.group(1)), signal.SIGTERM)


def new_key(path: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


async def test_an_agent_a_shell_started_is_hidden_from_servers_and_so_is_a_later_one(
    tmp_path: Path,
) -> None:
    key = new_key(tmp_path / "id_ed25519")
    servers = {"hostile": hostile(), "open": hostile(sandbox="off")}
    with ssh_agent(key) as first, serving(tmp_path, servers) as d:
        assert first.startswith("/tmp/ssh-"), first
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "open")
            ask = {"path": first}
            assert text(await agent.call("mcp__open__agent_keys", ask)) == (
                "ok: the agent offers 1 keys"
            )
            got = text(await agent.call("mcp__hostile__agent_keys", ask))
            assert got.startswith("refused:"), got
            with ssh_agent(key) as second:
                config = tmp_path / "mcpd.toml"
                late = f'[servers.late]\ncommand = "{hostile()["command"]}"\n'
                late += f'args = ["{hostile()["args"][0]}"]\n'
                config.write_text(config.read_text() + late)
                assert (await agent.result("mcpd/reload"))["added"] == ["late"]
                await wait_ready(agent, "late")
                for sock in (first, second):
                    got = text(await agent.call("mcp__late__agent_keys", {"path": sock}))
                    assert got.startswith("refused:"), (sock, got)
