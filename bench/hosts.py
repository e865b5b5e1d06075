"""Host sessions without mcpd: ``bench/launcher.py`` processes, started and awaited.

Each session is one launcher process that starts its own servers from a spec, does the
handshake and the full listing with each, reports one JSON line and then idles until its
stdin closes. The start-up floor is one such session with fifty servers; the
shared-instance benchmark runs N of them side by side.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import procstat
from bench.targets import BENCH, PYTHON, ROOT, TargetUnavailable, log_tail

LAUNCHER = str(BENCH / "launcher.py")


def server_spec(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"argv": argv}
    if env:
        spec["env"] = env
    return spec


class Sessions:
    """``count`` launcher processes, each running ``copies`` x the servers in ``spec``.

    ``ready_s`` is the time from the first spawn to the last ready line, on the same
    clock as mcpd's start-up (time.monotonic() just before the spawn).
    """

    def __init__(
        self,
        workdir: Path,
        logdir: Path,
        name: str,
        spec: list[dict[str, Any]],
        count: int = 1,
        copies: int = 1,
        timeout: float = 60.0,
    ) -> None:
        self.spec_path = workdir / f"{name}.json"
        self.log = logdir / f"{name}.log"
        self.spec = spec
        self.count = count
        self.copies = copies
        self.timeout = timeout
        self.procs: list[subprocess.Popen[bytes]] = []
        self.reports: list[dict[str, Any]] = []
        self.ready_s = 0.0
        self.launcher_cpu_s = 0.0  # the launchers' own CPU until ready (not their servers')

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def __enter__(self) -> Sessions:
        self.spec_path.write_text(json.dumps(self.spec))
        cmd = [
            PYTHON, "-S", LAUNCHER, "--spec", str(self.spec_path), "--copies", str(self.copies),
            "--stderr", str(self.log), "--timeout", str(self.timeout),
        ]  # fmt: skip
        started = time.monotonic()
        try:
            for _ in range(self.count):
                self.procs.append(
                    subprocess.Popen(
                        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, bufsize=0
                    )
                )
            self._await_reports(started)
        except BaseException:
            self.__exit__()
            raise
        self.ready_s = time.monotonic() - started
        self.launcher_cpu_s = sum(procstat.process_cpu_seconds(pid) for pid in self.pids)
        return self

    def _await_reports(self, started: float) -> None:
        sel = selectors.DefaultSelector()
        buffers: dict[int, bytes] = {}
        for proc in self.procs:
            assert proc.stdout is not None
            sel.register(proc.stdout, selectors.EVENT_READ, proc)
            buffers[proc.pid] = b""
        deadline = started + self.timeout + 10
        try:
            while len(self.reports) < self.count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TargetUnavailable(
                        f"{self.count - len(self.reports)} session(s) not ready after"
                        f" {self.timeout + 10:.0f} s{log_tail(self.log, 5)}"
                    )
                for key, _ in sel.select(left):
                    proc = key.data
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        raise TargetUnavailable(
                            f"a session exited ({proc.wait()}) before it was ready"
                            f"{log_tail(self.log, 5)}"
                        )
                    buffers[proc.pid] += chunk
                    if b"\n" in buffers[proc.pid]:
                        sel.unregister(key.fileobj)
                        report = json.loads(buffers[proc.pid])
                        if not report["ok"]:
                            why = "; ".join(report["failures"][:3])
                            tail = log_tail(self.log, 5)
                            raise TargetUnavailable(f"a session failed: {why}{tail}")
                        self.reports.append(report)
        finally:
            sel.close()

    def tools(self) -> list[int]:
        """Tools listed per server, for every session in turn."""
        return [n for report in self.reports for n in report["tools"]]

    def below(self) -> set[int]:
        """Every live process below the launchers (the launchers excluded)."""
        return procstat.descendants(self.pids) - set(self.pids)

    def servers_memory(self) -> dict[str, int]:
        """Processes and RSS of everything below the launchers."""
        return procstat.sum_memory_kb(self.below())

    def launchers_memory(self) -> dict[str, int]:
        return procstat.sum_memory_kb(self.pids)

    def per_server_memory(self) -> list[dict[str, Any]]:
        """For each server of the first session: its name and the RSS of its subtree."""
        out = []
        for child in procstat.children(self.pids[0]):
            mem = procstat.sum_memory_kb(procstat.descendants([child]))
            out.append({"name": procstat.command_name(child), **mem})
        return out

    def __exit__(self, *exc: object) -> None:
        """Close every stdin (each launcher then stops its servers), then wait."""
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for pid in procstat.descendants([proc.pid]):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
