"""Run a stdio MCP server and log every line the client sends it to a file.

usage: python stdio_tap.py LOGFILE -- COMMAND [ARG...]

Bytes are relayed unchanged both ways; the log lets a test see what reached the
server (a notifications/cancelled, a progressToken) without changing the server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def main() -> None:
    log_path = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=sys.stdout.buffer)
    assert child.stdin is not None

    def pump() -> None:
        with open(log_path, "ab", buffering=0) as log:
            for line in sys.stdin.buffer:
                log.write(line)
                try:
                    child.stdin.write(line)  # type: ignore[union-attr]
                    child.stdin.flush()  # type: ignore[union-attr]
                except BrokenPipeError:
                    break
        child.stdin.close()  # type: ignore[union-attr]

    threading.Thread(target=pump, daemon=True).start()
    os._exit(child.wait())


main()
