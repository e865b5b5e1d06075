"""Under a root mcpd, a strict server, which runs as root without capabilities, reads
none of what only root (or root's group) may read in ``/etc``, and still reads what
everyone may."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    serving,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)
KEY = "root-only-key-6c2d"


@pytest.fixture(autouse=True)
def _runs_as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mcpd runs as root only for root")


@pytest.fixture
def root_only() -> Iterator[Path]:
    """A file of root's in /etc, mode 0600, and a directory of root's, mode 0700, with a
    file others could read were they let in."""
    key = Path("/etc") / f"mcpd-test-{os.getpid()}.key"
    private = Path("/etc") / f"mcpd-test-{os.getpid()}.d"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, KEY.encode())
    os.close(fd)
    private.mkdir(0o700)
    (private / "key.pem").write_text(KEY)
    (private / "key.pem").chmod(0o644)
    try:
        yield key
    finally:
        key.unlink()
        (private / "key.pem").unlink()
        private.rmdir()


async def test_a_strict_server_under_root_reads_no_root_only_file_in_etc(
    tmp_path: Path, root_only: Path
) -> None:
    with serving(tmp_path, {"strict": hostile(sandbox="strict", read=RUNTIME)}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "strict")
            private = root_only.with_suffix(".d") / "key.pem"
            for path in (root_only, private, Path("/etc/shadow")):
                got = text(await agent.call("mcp__strict__read_file", {"path": str(path)}))
                assert not got.startswith("ok:"), (path, got)
            got = text(await agent.call("mcp__strict__read_file", {"path": "/etc/passwd"}))
            assert got.startswith("ok: root:"), got


def _replace(path: Path, content: str) -> None:
    """``path`` written afresh and renamed over itself, root's alone, as ``passwd``
    writes ``/etc/shadow``."""
    fresh = path.with_name(f".{path.name}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, content.encode())
    os.close(fd)
    os.rename(fresh, path)


async def test_a_root_only_file_in_etc_replaced_after_the_start_stays_unreadable(
    tmp_path: Path, root_only: Path
) -> None:
    inner = root_only.with_name(f"mcpd-test-{os.getpid()}.open")
    inner.mkdir(0o755)
    secret = inner / "secret"
    secret.write_text(KEY)
    secret.chmod(0o600)
    try:
        with serving(tmp_path, {"strict": hostile(sandbox="strict", read=RUNTIME)}) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "strict")
                _replace(root_only, "NEW-" + KEY)
                _replace(secret, "NEW-" + KEY)
                for path in (root_only, secret):
                    got = text(await agent.call("mcp__strict__read_file", {"path": str(path)}))
                    assert KEY not in got, (path, got)
                got = text(await agent.call("mcp__strict__read_file", {"path": "/etc/passwd"}))
                assert got.startswith("ok: root:"), got
    finally:
        secret.unlink()
        inner.rmdir()
