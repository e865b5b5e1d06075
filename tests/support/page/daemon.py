"""``mcpd serve`` for the status page's browser tests, in a process of its own, with
real servers, a server to kill, one that cannot start and one (``tickets``) whose tools
a test rewrites; and what the tests do with the browser on its page."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.cli.apart import APART
from tests.support.system.procs import scripted

ROOT = Path(__file__).resolve().parents[3]
CHANGING = str(ROOT / "tests" / "support" / "servers" / "changing.py")
BURST = str(ROOT / "tests" / "support" / "clients" / "call_burst.py")
SEARCH = {
    "name": "search",
    "description": "Search tickets.",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def transfer(description: str, destination: str) -> dict[str, Any]:
    """A tool of many arguments, whose last one's description is far down its diff."""
    fields = {f"f{n:02}": {"type": "string", "description": f"Field {n}."} for n in range(1, 8)}
    fields["f08"] = {"type": "string", "description": destination}
    schema = {"type": "object", "properties": fields}
    return {"name": "transfer", "description": description, "inputSchema": schema}


TRANSFER = transfer("Transfer funds.", "Field 8.")
# One request on the socket named first, its reply line printed.
_ONE_CALL = """
import socket, sys
with socket.socket(socket.AF_UNIX) as s:
    s.settimeout(20)
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode() + b"\\n")
    sys.stdout.buffer.write(s.makefile("rb").readline())
"""


class Daemon:
    """``mcpd serve`` in a process of its own, with its socket and endpoint."""

    def __init__(self, tmp: Path) -> None:
        victim, victim_args = scripted("--tools", "2")
        self.definitions = tmp / "definitions.json"
        self.definitions.write_text(json.dumps({"tools": [SEARCH, TRANSFER]}))
        self.reached = tmp / "reached.log"
        servers = {
            "notes": {"command": sys.executable, "args": ["-m", "mcpd.demo.notes"]},
            "tickets": {
                "command": sys.executable,
                "args": [CHANGING, str(self.definitions), str(self.reached)],
            },
            "victim": {"command": victim, "args": list(victim_args)},
            "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        }
        self.socket = str(tmp / "mcpd.sock")
        lines = [
            "[daemon]",
            f"socket = {json.dumps(self.socket)}",
            f"state_dir = {json.dumps(str(tmp / 'state'))}",
            'http_listen = "127.0.0.1:0"',
            # A killed server stays down for the test to see, not restarted at once.
            "backoff_base = 30.0",
            "backoff_cap = 30.0",
        ]
        for alias, server in servers.items():
            lines += [f"[servers.{alias}]", f"command = {json.dumps(server['command'])}"]
            lines.append(f"args = {json.dumps(server['args'])}")
        # Reading a note waits for a person's approval.
        lines += ["[[policy]]", 'tools = ["notes/read_note"]', 'action = "ask"']
        config = tmp / "config.toml"
        config.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--log", "stderr"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
            text=True,
        )
        self.log: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if not self._ready.wait(30):
            self.stop()
            raise AssertionError("mcpd did not start:\n" + "".join(self.log[-30:]))
        endpoint = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/mcp", self.status()["daemon"]["http"])
        assert endpoint is not None
        self.port = int(endpoint.group(1))
        self.origin = f"http://127.0.0.1:{self.port}"

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if "listening on" in line:
                self._ready.set()

    def status(self) -> dict[str, Any]:
        """``GET /status`` on the socket."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(self.socket)
            s.sendall(b"GET /status HTTP/1.0\r\nHost: mcpd\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        status: dict[str, Any] = json.loads(data.partition(b"\r\n\r\n")[2])
        return status

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call`` of ``tool`` on the socket, as an agent makes it."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        params = {"name": tool, "arguments": arguments or {}, "_meta": meta}
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        # Started apart from the test, and gone once answered: an agent's processes
        # that live on, or its host, may not approve on the page this test opened.
        done = subprocess.run(
            [*APART, sys.executable, "-c", _ONE_CALL, self.socket, line],
            capture_output=True, timeout=30, check=True,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(done.stdout)["result"]
        return result

    def pid_of(self, alias: str) -> int:
        return next(s["pid"] for s in self.status()["servers"] if s["alias"] == alias)

    def dashboard(self) -> str:
        """The address ``mcpd dashboard`` prints."""
        out = subprocess.run(
            [sys.executable, "-m", "mcpd", "dashboard", "--no-browser", "--socket", self.socket],
            capture_output=True, text=True, timeout=30, cwd=ROOT, check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        found = re.search(r"http://\S+\?code=\S+", out.stdout)
        assert found is not None, out.stdout + out.stderr
        return found.group(0)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)


def open_page(driver: Any, mcpd: Daemon) -> None:
    """Back to the page (the session's cookie still holds), live; what the console had
    from before (refusals a test asked for) is let go."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")
    driver.get(mcpd.origin + "/")
    WebDriverWait(driver, 10).until(lambda d: d.find_element("id", "live").text == "live")


def row(driver: Any, alias: str) -> Any:
    return driver.find_element("css selector", f'tr[data-server="{alias}"]')


def in_row(driver: Any, alias: str, attribute: str, within: str = "") -> str | None:
    """An attribute (or ``"text"``) of a server's row, or of what ``within`` selects in
    it, read in one step in the page: the live page replaces rows as news comes, so a row
    found first may be gone by the time it is read."""
    value = driver.execute_script(
        "const at = document.querySelector(arguments[0]);"
        "if (!at) return null;"
        "return arguments[1] === 'text' ? at.textContent : at.getAttribute(arguments[1]);",
        f'tr[data-server="{alias}"] {within}'.strip(),
        attribute,
    )
    assert value is None or isinstance(value, str)
    return value


def severe(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
