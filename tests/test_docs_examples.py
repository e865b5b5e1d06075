"""Every ```console block of README.md and docs/*.md, run: the documentation's
transcripts are what mcpd prints today.

Each block runs in a working directory of its own, holding the example files its
document wrote before it (``<!-- file: NAME -->``) and ``$MCPD_SOCKET``, in a ``HOME``
of its own with the XDG directories, with ``mcpd``, ``.venv/bin/mcpd`` and ``python3``
running this checkout. It runs against what its marker asks for
(``tests/support/reading/transcripts``): by default the demo, ``mcpd serve --demo``, as a
newcomer starts it; or ``mcpd serve --config FILE``; or no daemon at all. A block that
needs a real systemd, a browser or a host program names the test that covers it instead,
and that file must exist.

The documents are the expectation. When an output changes on purpose, run this with
``MCPD_DOCS_UPDATE=1``: each command that no longer matches gets what it printed as its
expected output (expected lines that still match, ``...`` and all, are kept); then put
``...`` where the new text varies from run to run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.reading.transcripts import (
    Block,
    blocks,
    matches,
    merged,
    output_lines,
    rewrite,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [b for doc in DOCS for b in blocks(doc)]
COVERED = "covered by "
SERVE = "serve "
UPDATE = os.environ.get("MCPD_DOCS_UPDATE") == "1"
# A command's own limit; a block's is the test's timeout below.
COMMAND_TIMEOUT = 60.0
READY_TIMEOUT = 60.0


def test_the_documents_have_console_blocks() -> None:
    """A parser that found nothing would pass every document."""
    assert len(BLOCKS) >= 10
    assert {b.doc.name for b in BLOCKS} >= {"README.md", "guide.md", "configuration.md"}


def test_an_ellipsis_stands_for_what_varies_and_nothing_else_does() -> None:
    assert matches(["pid ... on ...sock"], ["pid 42 on /tmp/x/mcpd.sock"])
    assert not matches(["pid ... on ...sock"], ["pid 42 at /tmp/x/mcpd.sock"])
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["a", "...", "z"], ["a", "z"])
    assert not matches(["a", "z"], ["a", "z", "more"])
    assert not matches(["a (x)"], ["a (y)"]), "the rest is text, not a pattern"
    assert merged(["pid ...", "old"], ["pid 7", "new", "added"]) == ["pid ...", "new", "added"]


def test_every_marker_is_one_the_runner_knows() -> None:
    for b in BLOCKS:
        known = b.needs in ("demo", "no daemon") or b.needs.startswith((SERVE, COVERED))
        assert known, f"{b.id}: unknown console marker {b.needs!r}"
        if b.needs.startswith(SERVE):
            name = b.needs[len(SERVE) :]
            assert name in {f.name for f in b.files}, (
                f"{b.id}: serves {name!r}, which no <!-- file: --> block before it writes"
            )


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.needs.startswith(COVERED)], ids=str)
def test_a_block_not_run_here_names_a_test_that_exists(block: Block) -> None:
    path = block.needs[len(COVERED) :]
    assert path.startswith("tests/") and path.endswith(".py"), f"{block.id}: {path!r}"
    assert (ROOT / path).is_file(), f"{block.id}: {path} does not exist"


RUN = [b for b in BLOCKS if not b.needs.startswith(COVERED)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_console_block(block: Block, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Short: the socket's path must fit a sockaddr_un.
    # The reader's home, a directory of theirs they work in, and their programs apart.
    base = tmp_path_factory.mktemp("doc")
    work = base / "home" / "w"
    work.mkdir(parents=True)
    env = _environment(base, work)
    for example in block.files:
        target = work / example.name
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if example.append else "w") as f:
            f.write(example.text)
    for program in {shlex.split(c.text)[0] for c in block.commands}:
        if shutil.which(program, path=env["PATH"]) is None and not (work / program).exists():
            pytest.skip(f"{block.id} runs {program}, which this machine does not have")
    failures: list[str] = []
    updates: dict[int, list[str]] = {}
    with _daemon(block, work, env):
        status = 0
        for n, cmd in enumerate(block.commands):
            out = subprocess.run(
                ["bash", "-c", f"(exit {status}); {cmd.text}"],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
            status = out.returncode
            actual = output_lines(out.stdout)
            if not matches(cmd.expected, actual):
                updates[n] = merged(cmd.expected, actual)
                failures.append(_difference(block, cmd.line, cmd.text, cmd.expected, actual))
    if failures and UPDATE:
        rewrite(block, updates)
        pytest.fail(f"{block.id}: wrote the new outputs into {block.doc.name}; check them")
    assert not failures, "\n\n".join(failures)


def _difference(block: Block, line: int, text: str, expected: list[str], actual: list[str]) -> str:
    import difflib

    diff = difflib.unified_diff(expected, actual, "documented", "printed", lineterm="")
    return (
        f"{block.doc.name}:{line}: $ {text}\nprints something else than documented "
        "(MCPD_DOCS_UPDATE=1 writes what it printed into the document):\n" + "\n".join(diff)
    )


def _environment(base: Path, work: Path) -> dict[str, str]:
    """A reader's shell in ``work``: mcpd on PATH, HOME and the XDG directories of their
    own."""
    bin_dir = base / ".bin"
    for name, argv in (
        ("mcpd", f'exec {shlex.quote(sys.executable)} -m mcpd "$@"'),
        ("python3", f'exec {shlex.quote(sys.executable)} "$@"'),
    ):
        for where in (bin_dir, work / ".venv" / "bin"):
            where.mkdir(parents=True, exist_ok=True)
            script = where / name
            script.write_text(f"#!/bin/sh\n{argv}\n")
            script.chmod(0o755)
    home = base / "home"
    (home / ".config").mkdir(parents=True)
    runtime = base / "run"
    runtime.mkdir(mode=0o700)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MCPD_", "LISTEN_", "XDG_"))
        and k not in ("STATE_DIRECTORY", "CREDENTIALS_DIRECTORY", "BROWSER", "DISPLAY")
    }
    peers = ROOT / "tests" / "peers" / "node_modules" / ".bin"
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(peers), env.get("PATH", os.defpath)]),
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",  # stdout and stderr interleaved as on a terminal
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_RUNTIME_DIR=str(runtime),
        MCPD_SOCKET=str(work / "mcpd.sock"),
        COLUMNS="120",
        TZ="UTC",
    )
    return env


@contextmanager
def _daemon(block: Block, work: Path, env: dict[str, str]) -> Iterator[None]:
    if block.needs == "no daemon":
        yield
        return
    if block.needs == "demo":
        argv = ["serve", "--demo"]
    else:
        argv = ["serve", "--config", block.needs[len(SERVE) :]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpd", *argv, "--log", "stderr"],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    ready = threading.Event()

    def read_log() -> None:
        # Read to the end, so the daemon never blocks on a full pipe.
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if f"listening on {env['MCPD_SOCKET']}" in line:
                ready.set()
        ready.set()

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        ready.wait(READY_TIMEOUT)
        if proc.poll() is not None or not any("listening on" in ln for ln in log):
            pytest.fail(f"{block.id}: mcpd {' '.join(argv)} did not start:\n{''.join(log)}")
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        finally:
            reader.join(timeout=10)
