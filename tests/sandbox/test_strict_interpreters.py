"""A strict server run from a virtualenv: its command, or the interpreter a script's
``#!`` line names, is a link into the Python the virtualenv was made from, which a
strict sandbox does not show unless granted. Such a server does not start, and says
which file it is missing and which key to add its folder to, as ``mcpd check-config``
warns; once that folder is granted, a reload starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.daemons.sandboxed import HOSTILE, Served, agent_of, hostile, serving, wait_ready
from transports.stdio.sandbox.hidden_links import SYSTEM_DIRS
from transports.stdio.sandbox.plan import within

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
BASE = os.path.realpath(sys.base_prefix)


@pytest.fixture(autouse=True)
def _python_outside_the_system() -> None:
    if sys.prefix == sys.base_prefix or any(within(BASE, d) for d in SYSTEM_DIRS):
        pytest.skip("the tests' Python is no virtualenv made from a Python outside the system")


async def failed(d: Served, *aliases: str) -> dict[str, Any]:
    """The status once each of ``aliases`` has failed to start."""
    with trio.fail_after(30):
        while True:
            rows = await d.status()
            if all(rows[a]["last_error"] for a in aliases):
                return rows
            await trio.sleep(0.05)


async def test_a_strict_server_missing_its_virtualenvs_python_says_which_folder_to_grant(
    tmp_path: Path,
) -> None:
    tool = tmp_path / "tool"
    tool.mkdir()
    script = tool / "server"
    here = str(Path(HOSTILE).parent)
    script.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.path.insert(0, {here!r})\n"
        f"runpy.run_path({HOSTILE!r}, None, '__main__')\n"
    )
    script.chmod(0o755)
    read = [sys.prefix, here]
    servers = {
        # The virtualenv's python itself, whose link leads out of it.
        "linked": hostile(sandbox="strict", read=read),
        # A script of the virtualenv's, run by that python through its #! line.
        "script": {"command": str(script), "sandbox": "strict", "read": [*read, str(tool)]},
    }
    with serving(tmp_path, servers) as d:
        rows = await failed(d, "linked", "script")
        advice = "add the folder it is installed in, {}, to servers.{}.read"
        needs = "cannot run without it "
        for alias, how in (
            ("linked", f"its command {sys.executable} is a link that leads there"),
            (
                "script",
                f"the #! line of {script} names {sys.executable} to run it, a link that "
                "leads there",
            ),
        ):
            said = rows[alias]["last_error"]
            assert rows[alias]["state"] != "ready"
            assert f"is outside what a strict sandbox shows, and its command {needs}({how})" in said
            assert advice.format(BASE, alias) in said
            assert "No such file or directory" not in said
        checked = subprocess.run(
            [sys.executable, "-m", "mcpd", "check-config", "--config", str(d.config)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert checked.returncode == 0
        for alias in ("linked", "script"):
            warned = [
                w
                for w in checked.stderr.splitlines()
                if w.startswith(f"warning: servers.{alias}: ")
            ]
            assert len(warned) == 1 and advice.format(BASE, alias) in warned[0]
            assert warned[0].endswith(
                "; the server does not start until that is fixed, when "
                "mcpd's next try or a reload starts it"
            )
        # As it says: the folder granted, a reload starts both.
        d.config.write_text(
            d.config.read_text().replace(f'"{sys.prefix}", ', f'"{sys.prefix}", "{BASE}", ')
        )
        async with agent_of(d) as agent:
            await agent.result("mcpd/reload")
            await wait_ready(agent, "linked", "script")
