"""A command run as a person runs it at a terminal of their own: in a session of its
own, descended from none of the processes that started it. A test that is itself an
agent connected to mcpd (it holds a connection that spoke MCP) runs the commands mcpd
keeps from agents through this, ``[*APART, *argv]``; the command's input and output
are its own, and its exit status is passed back.

How: a child leaves the session, starts a grandchild and exits; the grandchild, once
its parent is gone (the kernel has handed it to init or a subreaper), runs the
command and writes its exit status back on a pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys

APART = [sys.executable, os.path.abspath(__file__)]


def main(argv: list[str]) -> int:
    status_r, status_w = os.pipe()
    gone_r, gone_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(status_r)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)  # its end of ``gone`` closes with it
        os.close(gone_w)
        os.read(gone_r, 1)  # until the parent is gone
        done = subprocess.run(argv, check=False)
        os.write(status_w, str(done.returncode).encode())
        os._exit(0)
    os.close(status_w)
    os.close(gone_w)
    os.close(gone_r)
    os.waitpid(child, 0)
    said = b""
    while chunk := os.read(status_r, 16):
        said += chunk
    return int(said or b"1")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
