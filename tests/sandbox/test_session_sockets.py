"""The sockets of the user's session stay out of a sandboxed server's reach when mcpd
is told of another runtime directory than the login's: the session bus, the user's
service manager, the GnuPG agent and p11-kit's server in /run/user/UID, and the
session bus at the path mcpd's own DBUS_SESSION_BUS_ADDRESS names. A server without
a sandbox reaches each, which shows they answer. mcpd runs with a /run/user of its
own (the test's directory bound there), so nothing of this machine's is touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import agent_of, hostile, serving, text, wait_ready

pytestmark = pytest.mark.timeout(120)
SESSION = ("bus", "systemd/private", "gnupg/S.gpg-agent", "p11-kit/pkcs11")


@pytest.fixture(autouse=True)
def _a_run_user_of_its_own_can_be_made() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.isdir("/run/user"):
        pytest.skip("needs root, unshare (util-linux) and /run/user to give mcpd its own")


@contextlib.contextmanager
def listening(paths: list[Path]) -> Iterator[None]:
    """A Unix socket listening at each of ``paths`` (its directory made private)."""
    with contextlib.ExitStack() as stack:
        for path in paths:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            listener.bind(str(path))
            listener.listen(4)
        yield


def own_run_user(where: Path) -> tuple[str, ...]:
    """The command line that runs what follows it with ``where`` as its /run/user."""
    script = 'mount --bind "$1" /run/user && shift && exec "$@"'
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(where))


async def test_the_sessions_sockets_are_hidden_wherever_mcpd_is_told_its_runtime_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_user = tmp_path / "run-user"
    session = run_user / str(os.getuid())
    bus = tmp_path / "dbus-session"
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={bus},guid=0123")
    sockets = [session / name for name in SESSION] + [bus]
    inside = [f"/run/user/{os.getuid()}/{name}" for name in SESSION] + [str(bus)]
    servers = {"hostile": hostile(), "open": hostile(sandbox="off")}
    with listening(sockets), serving(tmp_path, servers, wrap=own_run_user(run_user)) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "open")
            for path in inside:
                got = text(await agent.call("mcp__open__connect_unix", {"path": path}))
                assert got == f"ok: connected to {path}", got
                got = text(await agent.call("mcp__hostile__connect_unix", {"path": path}))
                assert got.startswith("refused:"), (path, got)
