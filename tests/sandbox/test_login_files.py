"""The logins other tools keep in files are hidden from a server at the default level:
the container registries' (podman's, in the runtime directory and in the home, and
where ``$REGISTRY_AUTH_FILE`` and ``$DOCKER_CONFIG`` point), PostgreSQL's password
file and rclone's remotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import agent_of, hostile, serving, text, wait_ready

pytestmark = pytest.mark.timeout(120)
LOGIN = "planted-login-3b9a"


async def test_a_server_reads_none_of_the_logins_kept_in_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, runtime = tmp_path / "home", tmp_path / "run"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "ci" / "auth.json"))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "ci" / "docker"))
    logins = [
        runtime / "containers" / "auth.json",
        home / ".config" / "containers" / "auth.json",
        home / ".pgpass",
        home / ".config" / "rclone" / "rclone.conf",
        tmp_path / "ci" / "auth.json",
        tmp_path / "ci" / "docker" / "config.json",
    ]
    for login in logins:
        login.parent.mkdir(parents=True, exist_ok=True)
        login.write_text(LOGIN)
        login.chmod(0o600)
    with serving(tmp_path, {"hostile": hostile()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            for login in logins:
                got = await agent.call("mcp__hostile__read_file", {"path": str(login)})
                assert LOGIN not in text(got), login
