"""A minimal MCP host session: start stdio servers, handshake, list their tools, then idle.

Two benchmarks use it. As the start-up floor it starts fifty servers at once with nothing
of mcpd in between; as a host session it starts that session's own copy of every server
(or one ``mcpd bridge``), the way hosts do.

Every server is spawned at once. Each gets ``initialize`` (2025-11-25), then
``notifications/initialized`` and ``tools/list``, page after page by ``nextCursor``. When
every server has listed its last page, one JSON line goes to stdout::

    {"ok": true, "elapsed_s": 1.23, "tools": [200, 200, ...], "failures": []}

Then it idles until stdin closes, and stops its servers by closing their stdin.

    python -S bench/launcher.py --spec servers.json [--copies 50] [--stderr LOG]

The spec is a JSON list of ``{"argv": [...], "env": {...}}`` (env is optional and added to
this process's environment). Standard library only, and run with ``-S``: as a floor it
must cost as little as a launcher can.
"""

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time

# The annotations import nothing at run time, since a floor must cost as little as it can:
# where they name more than builtins they are strings, or in function bodies, which are
# not evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, NotRequired, TypedDict

    class Spec(TypedDict):
        """One server of the spec file."""

        argv: list[str]
        env: NotRequired[dict[str, str] | None]

    class Args(TypedDict):
        spec: str
        copies: int
        stderr: str | None
        timeout: float


PROTOCOL = "2025-11-25"
CLIENT_INFO = {"name": "mcpd-bench-session", "version": "1"}
METHOD_NOT_FOUND = -32601


def line(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class Server:
    """One child and where its handshake stands."""

    def __init__(self, index: int, spec: "Spec", stderr: "IO[bytes] | int") -> None:
        env = dict(os.environ)
        env.update(spec.get("env") or {})
        self.index = index
        self.proc = subprocess.Popen(
            spec["argv"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            bufsize=0,
            # As mcpd does. With autogroup scheduling a new session is a scheduling group
            # of its own, so on a shared machine this decides how much CPU the servers
            # get, and the floor must not get less than mcpd's servers do.
            start_new_session=True,
        )
        self.buffer = b""
        self.next_id = 1
        self.waiting_for: int | None = None
        self.tools = 0
        self.done = False
        self.failure: str | None = None

    def request(self, method: str, params: dict[str, object] | None) -> None:
        self.waiting_for = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.waiting_for, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(line(msg))

    def send(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None  # a pipe
        try:
            stdin.write(data)
        except OSError as exc:
            self.fail(f"write: {exc}")

    def start(self) -> None:
        params: dict[str, object] = {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        }
        self.request("initialize", params)

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = f"server {self.index}: {why}"
        self.done = True

    def feed(self, chunk: bytes) -> bool:
        """Handle what the server wrote; False once there is nothing more to read."""
        if not chunk:
            self.fail("closed stdout before listing its tools")
            return False
        self.buffer += chunk
        while not self.done and b"\n" in self.buffer:
            raw, _, self.buffer = self.buffer.partition(b"\n")
            if raw.strip():
                self.handle(raw)
        return not self.done

    def handle(self, raw: bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            self.fail(f"not JSON: {raw[:120]!r}")
            return
        if not isinstance(msg, dict):
            return
        if "method" in msg:
            if "id" in msg:  # a request from the server: this session offers nothing
                error = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
                self.send(line({"jsonrpc": "2.0", "id": msg["id"], "error": error}))
            return
        if msg.get("id") != self.waiting_for:
            return
        if "error" in msg:
            self.fail(f"error {msg['error']}")
            return
        result = msg.get("result") or {}
        if self.waiting_for == 1:
            self.send(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            self.request("tools/list", None)
            return
        self.tools += len(result.get("tools") or [])
        cursor = result.get("nextCursor")
        if cursor:
            self.request("tools/list", {"cursor": cursor})
        else:
            self.done = True


def parse_args(argv: list[str]) -> "Args":
    args: dict[str, Any] = {"spec": None, "copies": 1, "stderr": None, "timeout": 60.0}
    items = iter(argv)
    for item in items:
        key = item.lstrip("-")
        if key not in args:
            sys.exit(f"launcher: unknown argument {item!r}")
        args[key] = next(items, None)
    if args["spec"] is None:
        sys.exit("launcher: --spec FILE is required")
    return {
        "spec": args["spec"],
        "copies": int(args["copies"]),
        "stderr": args["stderr"],
        "timeout": float(args["timeout"]),
    }


def main() -> None:
    t0 = time.monotonic()
    args = parse_args(sys.argv[1:])
    with open(args["spec"]) as f:
        specs: list[Spec] = json.load(f) * args["copies"]
    if args["stderr"]:
        with open(args["stderr"], "ab") as stderr:
            servers = [Server(i, spec, stderr) for i, spec in enumerate(specs)]
    else:
        servers = [Server(i, spec, subprocess.DEVNULL) for i, spec in enumerate(specs)]
    sel = selectors.DefaultSelector()
    for server in servers:
        server.start()
        assert server.proc.stdout is not None  # a pipe
        sel.register(server.proc.stdout, selectors.EVENT_READ, server)
    deadline = t0 + args["timeout"]
    while any(not s.done for s in servers):
        left = deadline - time.monotonic()
        if left <= 0:
            for s in servers:
                if not s.done:
                    s.fail(f"no complete listing within {args['timeout']:.0f} s")
            break
        for key, _ in sel.select(left):
            server = key.data
            if not server.feed(os.read(key.fd, 1 << 16)):
                sel.unregister(key.fileobj)
    sel.close()
    failures = [s.failure for s in servers if s.failure]
    report = {
        "ok": not failures,
        "elapsed_s": time.monotonic() - t0,
        "tools": [s.tools for s in servers],
        "failures": failures,
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    # Idle, as a host session does, until whoever started us closes our stdin.
    while os.read(0, 4096):
        pass
    for server in servers:
        assert server.proc.stdin is not None  # a pipe
        with contextlib.suppress(OSError):
            server.proc.stdin.close()
    end = time.monotonic() + 5
    for server in servers:
        try:
            server.proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


if __name__ == "__main__":
    main()
