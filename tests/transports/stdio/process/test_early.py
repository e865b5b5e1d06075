"""Stdio servers started before the event loop: a start takes one only when its
command, arguments, environment and working directory are all the same, and what
nobody took is stopped."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.support.system.procs import SCRIPTED, alive
from transports.stdio.process import early
from transports.stdio.process.childenv import environment
from transports.stdio.process.lifecycle import start


async def test_a_start_takes_only_a_process_started_with_its_exact_arguments(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, SCRIPTED]
    env = environment(True, {"WHO": "a"})
    cwd = str(tmp_path)
    pid = early.launch_early(argv, env, cwd)
    spare = early.launch_early(argv, env, cwd)
    others = []
    try:
        # Another environment, working directory or argument list: a start of its own.
        for a, e, d in (
            (argv, environment(True, {"WHO": "b"}), cwd),
            (argv, env, None),
            ([*argv, "--pid-file", str(tmp_path / "p")], env, cwd),
        ):
            child = start("x", a, e, d)
            others.append(child)
            assert child.pid not in (pid, spare)
        taken = start("x", argv, env, cwd)
        others.append(taken)
        assert taken.pid in (pid, spare)
        leftover = spare if taken.pid == pid else pid
        assert early.waiting() == [leftover]
        assert early.discard() == [leftover]
        assert early.waiting() == []
        assert not alive(leftover)
        assert alive(taken.pid)
    finally:
        early.discard()
        for child in others:
            os.kill(child.pid, signal.SIGKILL)  # unreaped until the wait: still its own
            await child.wait()
            for pipe in (child.stdin, child.stdout, child.stderr):
                if pipe is not None:
                    pipe.close()
