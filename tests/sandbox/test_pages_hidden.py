"""The page ``mcpd dashboard`` hands a browser carries the status page's one-time code,
and one written after a sandboxed server started is out of its reach all the same:
in the runtime directory, and in /tmp where there is none. Without a sandbox the
server reads it, which shows what the sandbox stopped."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from mcpd.cli.browser import pages_directory, write_page
from tests.support import bubblewrap
from tests.support.sandbox import agent_of, hostile, serving, steady, text, untouched, wait_ready

pytestmark = pytest.mark.timeout(120)

CODE = "code-" + secrets.token_hex(8)


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    bubblewrap.require()


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
            write_page(name, f"http://127.0.0.1:8765/?code={CODE}")
            page = os.path.join(pages_directory(), name)
            try:
                assert CODE in text(await agent.call("mcp__open__read_file", {"path": page}))
                got = text(await agent.call("mcp__hostile__read_file", {"path": page}))
                assert got.startswith("refused: FileNotFoundError") and CODE not in got, got
            finally:
                os.unlink(page)
            await untouched(d, agent, before)
