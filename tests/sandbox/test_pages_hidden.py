"""The page ``mcpd dashboard`` hands a browser carries the status page's one-time code,
and one written after a sandboxed server started is out of its reach all the same:
in the runtime directory, and in /tmp where there is none. Without a sandbox the
server reads it, which shows what the sandbox stopped. It goes where the daemon says,
whatever the command's own environment says."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcpd.cli.logins.browser import write_page
from mcpd.config.loading.paths import pages_directory
from tests.support.daemons.sandboxed import (
    ROOT,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

CODE = "code-" + secrets.token_hex(8)


@pytest.mark.parametrize("runtime", [True, False], ids=["runtime-dir", "tmp"])
async def test_a_page_written_after_a_server_started_is_hidden_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: bool
) -> None:
    if runtime:
        (tmp_path / "run").mkdir(mode=0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    servers = {"hostile": hostile(), "steady": steady(), "open": hostile(sandbox="off")}
    name = f"test-{secrets.token_hex(8)}.html"
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            before = await d.status()
            # As mcpd dashboard writes it, once the servers run.
            write_page(name, f"http://127.0.0.1:8765/?code={CODE}", pages_directory())
            page = os.path.join(pages_directory(), name)
            try:
                assert CODE in text(await agent.call("mcp__open__read_file", {"path": page}))
                got = text(await agent.call("mcp__hostile__read_file", {"path": page}))
                assert got.startswith("refused: FileNotFoundError") and CODE not in got, got
            finally:
                os.unlink(page)
            await untouched(d, agent, before)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_page_goes_where_the_daemon_hides_it_whatever_the_commands_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("run", "other", "told"):
        (tmp_path / name).mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    servers = {"hostile": hostile(), "open": hostile(sandbox="off")}
    told = tmp_path / "told" / "address"
    os.mkfifo(told)
    with serving(tmp_path, servers, http_listen=f"127.0.0.1:{free_port()}") as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            env = {
                **os.environ,
                "XDG_RUNTIME_DIR": str(tmp_path / "other"),
                "BROWSER": f"/bin/sh -c 'echo \"$0\" > {told}'",
            }
            command = subprocess.Popen(
                [sys.executable, "-m", "mcpd", "dashboard", "--socket", d.socket],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env,
            )  # fmt: skip
            try:
                with open(told) as f:
                    page = urlsplit(f.read().strip()).path
                assert os.path.dirname(page) == str(tmp_path / "run" / "mcpd-pages")
                assert "code=" in text(await agent.call("mcp__open__read_file", {"path": page}))
                got = text(await agent.call("mcp__hostile__read_file", {"path": page}))
                assert got.startswith("refused: FileNotFoundError"), got
            finally:
                command.terminate()
                command.wait()
            assert not os.path.exists(page)
