"""Helpers for check scripts that run as root inside the test container (Python 3.11,
stdlib only), against the real `mcpd serve` started by systemd. Copied to /opt/checks.

Every wait is bounded: a check that cannot see what it waits for fails with the last
value it saw, and the test prints the container's journal.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

MCPD = "/usr/local/bin/mcpd"
SOCKET = "/run/mcpd/mcpd.sock"


def sh(*cmd: str, check: bool = True, timeout: float = 60) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def step(text: str) -> None:
    print(f"--- {text}", flush=True)


def show(prop: str, unit: str = "mcpd.service") -> str:
    return sh("systemctl", "show", "-p", prop, "--value", unit)


def active(unit: str) -> str:
    return sh("systemctl", "is-active", unit, check=False)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll ``probe`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except Exception as exc:  # the state being polled may not exist yet
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(0.1)


def status_becomes(text: str, timeout: float = 30) -> None:
    """Wait until systemd shows ``STATUS=text`` for mcpd; on failure, list what it showed."""
    seen: list[str] = []

    def probe() -> bool:
        value = show("StatusText")
        if not seen or seen[-1] != value:
            seen.append(value)
        return value == text

    try:
        wait_for(f"StatusText={text!r}", probe, timeout)
    except AssertionError:
        raise AssertionError(f"StatusText never became {text!r}; it was {seen}") from None


def mcpd(
    *args: str, check: bool = True, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [MCPD, *args]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"mcpd {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
    return proc


def tool_names() -> list[str]:
    return sorted(t["name"] for t in json.loads(mcpd("tools", "--json").stdout)["tools"])


def journal(*match: str) -> list[dict[str, Any]]:
    """``journalctl -u mcpd MATCH... -o json`` as dicts, values decoded to text."""
    out = sh("journalctl", "-u", "mcpd", *match, "-o", "json", "--all", "--no-pager")
    entries = [json.loads(line) for line in out.splitlines() if line]
    for e in entries:
        for k, v in e.items():
            if isinstance(v, list) and all(isinstance(b, int) for b in v):
                e[k] = bytes(v).decode(errors="replace")  # non-printable values come as bytes
    return entries


def server_pids(main_pid: str) -> dict[int, str]:
    """The stdio server processes mcpd started: pid -> command line."""
    out = sh("ps", "-o", "pid=,args=", "--ppid", main_pid, check=False)
    pids = {}
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        pids[int(pid)] = args
    return pids


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = f.read().split(b"\0")
    return dict(i.decode().split("=", 1) for i in items if b"=" in i)


def wait_port(port: int, timeout: float = 30) -> None:
    import socket

    def probe() -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(f"port {port}", probe, timeout)


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
