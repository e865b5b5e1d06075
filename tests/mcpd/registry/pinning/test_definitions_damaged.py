"""A ``pins.json`` that cannot be read, through ``mcpd serve`` run again and again: every
server not approved since stays held on each later start, whether mcpd was stopped or
killed; approving one server leaves the others held; a second damaged file is kept
beside the first, not written over it; and only ``mcpd pins forget-unreadable`` ends
the hold, approving what the servers list then."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.client import Client
from tests.conftest import ROOT
from tests.support.cli.apart import APART
from tests.support.daemons.notify import Notifications
from tests.support.daemons.pins import CHANGED, Changing

pytestmark = pytest.mark.timeout(180)

DAMAGED = b'{"format":2,"serv'
NEW_SERVER = "mcpd approve tickets"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-pd-") as d:
        yield Path(d)


class Serving:
    """``mcpd serve`` of one config, started again as often as a test asks."""

    def __init__(self, where: Path, servers: dict[str, Changing]) -> None:
        self.where = where
        self.socket = str(where / "mcpd.sock")
        self.state = where / "state"
        self.config = where / "mcpd.toml"
        lines = [
            "[daemon]",
            f"socket = {json.dumps(self.socket)}",
            f"state_dir = {json.dumps(str(self.state))}",
        ]
        for alias, server in servers.items():
            command, *args = server.config()["command"], *server.config()["args"]
            lines += [f"[servers.{alias}]", f"command = {json.dumps(command)}"]
            lines.append(f"args = {json.dumps(args)}")
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[str] | None = None
        self.notify: Notifications | None = None

    def start(self) -> None:
        """Started, once every server listed what it has (READY=1)."""
        self.notify = Notifications(self.where / f"notify{len(os.listdir(self.where))}")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpd", "serve", "--config", str(self.config)],
            env={**os.environ, "PYTHONPATH": str(ROOT), "NOTIFY_SOCKET": self.notify.path},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.notify.next_with("READY=1", timeout=60)

    def stop(self, how: signal.Signals) -> str:
        """Its log, once ``how`` ended it."""
        assert self.proc is not None and self.notify is not None
        self.proc.send_signal(how)
        try:
            self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
            log = self.proc.communicate()[1]
            self.notify.sock.close()
        return log

    def tools(self) -> dict[str, dict[str, Any]]:
        with Client(self.socket) as client:
            return {t["name"]: t for t in client.list_tools()}

    def call(self, name: str) -> dict[str, Any]:
        params = {"name": name, "arguments": {"query": "x"}}
        with Client(self.socket) as client:
            result: dict[str, Any] = client.request("tools/call", params)
            return result

    def cli(self, *args: str) -> str:
        """``mcpd ARGS`` from a terminal of its own: the test is an agent of mcpd."""
        done = subprocess.run(
            [*APART, sys.executable, "-m", "mcpd", *args, "--socket", self.socket],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def kept(self) -> list[str]:
        return sorted(n for n in os.listdir(self.state) if ".unreadable" in n)


def held(tool: dict[str, Any]) -> bool:
    return tool["_meta"]["mcpd/available"] is False and "[held:" in tool["description"]


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_damaged_pin_file_holds_each_server_until_approved_across_restarts(
    short_dir: Path, how: signal.Signals
) -> None:
    (short_dir / "tickets").mkdir()
    (short_dir / "notes").mkdir()
    tickets, notes = Changing(short_dir / "tickets"), Changing(short_dir / "notes")
    mcpd = Serving(short_dir, {"tickets": tickets, "notes": notes})
    pins = mcpd.state / "pins.json"
    try:
        mcpd.start()
        assert not held(mcpd.tools()["mcp__tickets__search"])
        mcpd.stop(signal.SIGTERM)
        # While mcpd is stopped the server changes its tool, and the pin file is damaged.
        tickets.change()
        pins.write_bytes(DAMAGED)

        mcpd.start()
        tools = mcpd.tools()
        assert held(tools["mcp__tickets__search"]) and held(tools["mcp__notes__search"])
        assert "approved: tool search" in mcpd.cli("approve", "notes", "--yes")
        log = mcpd.stop(how)
        assert "is held until `mcpd approve ALIAS`" in log or how == signal.SIGKILL

        # Started again: the server approved is approved, the other is still held.
        mcpd.start()
        tools = mcpd.tools()
        assert not held(tools["mcp__notes__search"])
        search = tools["mcp__tickets__search"]
        assert held(search) and NEW_SERVER in search["description"]
        assert "id_rsa" not in json.dumps(search)
        assert mcpd.call("mcp__tickets__search")["isError"] is True
        assert "id_rsa" not in pins.read_text()
        assert (mcpd.state / "pins.json.unreadable").read_bytes() == DAMAGED
        mcpd.stop(how)

        # Damaged again: kept beside the first, which is not written over.
        pins.write_bytes(b"\x00" * 40)
        mcpd.start()
        assert held(mcpd.tools()["mcp__tickets__search"])
        assert mcpd.kept() == ["pins.json.unreadable", "pins.json.unreadable.2"]
        assert (mcpd.state / "pins.json.unreadable").read_bytes() == DAMAGED

        # Only the operator's word ends the hold: what is listed now is approved.
        out = mcpd.cli("pins", "forget-unreadable")
        assert "pins.json.unreadable" in out and "tickets" in out
        assert mcpd.kept() == []
        assert mcpd.tools()["mcp__tickets__search"]["description"] == f"[tickets] {CHANGED}"
        mcpd.stop(how)
        mcpd.start()
        assert not held(mcpd.tools()["mcp__tickets__search"])
        assert not held(mcpd.tools()["mcp__notes__search"])
    finally:
        if mcpd.proc is not None and mcpd.proc.poll() is None:
            mcpd.stop(signal.SIGKILL)
