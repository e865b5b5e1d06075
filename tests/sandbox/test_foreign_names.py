"""A name every sandbox hides that another local user took in /tmp before mcpd started
(a symbolic link to the system, or to a directory of the user's) decides nothing: the
sandboxed server starts, sees what it should, and mcpd names the link as another
user's in its journal and its status. mcpd runs with a /tmp of its own, so the links
planted there reach nothing else on this machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    ENDPOINT_TOKEN,
    ROOT,
    agent_of,
    hostile,
    serving,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

THEIRS = 4242  # another local user's uid
NOTES = "the user's own notes\n"


@pytest.fixture(autouse=True)
def _root_and_unshare() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (util-linux) to give mcpd a /tmp of its own")


def planted_tmp(tmp: Path, links: dict[str, str]) -> tuple[str, ...]:
    """The command line that runs what follows it with an empty /tmp of its own,
    holding ``links`` (name: target) of another user's. What mcpd needs of the old
    /tmp stays where it was: the test's directory, the checkout and the interpreter's
    environment (a checkout may live under /tmp, as a CI's clone does)."""
    kept = sorted({str(tmp), str(ROOT), sys.prefix, os.getcwd()})
    plant = " && ".join(
        f"ln -s {target} /tmp/{name} && chown -h {THEIRS}:{THEIRS} /tmp/{name}"
        for name, target in links.items()
    )
    # Each kept directory is bound back by a descriptor opened before the new /tmp
    # hides it: by its path, it would be the new /tmp's.
    held = " ".join(f'{fd}<"${fd - 2}"' for fd in range(3, 3 + len(kept)))
    back = " && ".join(
        f'mkdir -p "${fd - 2}" && mount --no-canonicalize --bind /proc/self/fd/{fd} "${fd - 2}"'
        for fd in range(3, 3 + len(kept))
    )
    script = (
        f"exec {held} && mount -t tmpfs -o mode=1777 tmpfs /tmp && {back} && "
        f'cd "$PWD" && shift {len(kept)} && {plant} && exec "$@"'
    )
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *kept)


async def test_another_users_links_in_tmp_hide_nothing_and_are_named(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTES)
    uid = os.geteuid()
    pages, tmux = f"/tmp/mcpd-pages-{uid}", f"/tmp/tmux-{uid}"
    wrap = planted_tmp(tmp_path, {pages[5:]: "/usr", tmux[5:]: str(work)})
    with serving(tmp_path, {"hostile": hostile()}, wrap=wrap) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            for path in (work / "notes.txt", Path(tmux) / "notes.txt"):
                got = text(await agent.call("mcp__hostile__read_file", {"path": str(path)}))
                assert got == f"ok: {NOTES}", got
            # What every sandbox hides is hidden all the same.
            token = str(tmp_path / "state" / "token")
            got = text(await agent.call("mcp__hostile__read_file", {"path": token}))
            assert got.startswith("refused: FileNotFoundError") and ENDPOINT_TOKEN not in got
            status = await agent.result("mcpd/status")
            warnings = status["daemon"]["warnings"]
            for name, target in ((pages, "/usr"), (tmux, str(work))):
                said = f"{name} is another user's symbolic link (uid {THEIRS}, "
                assert any(w.startswith(said) and f") to {target}: " in w for w in warnings)
                assert said in await d.logged(said)
            assert (await d.status())["hostile"]["restarts"] == 0
