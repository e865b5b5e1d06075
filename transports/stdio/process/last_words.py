"""The error a stdio server died of, as its runtime printed it last on stderr, and the
limit that error says it ran into.

A server's stderr is its log: a line that mentions EAGAIN or "out of memory" while the
server goes on says nothing of why it ended. Only its final error does: the lines its
runtime writes as it dies, which come last but for what follows them (stack frames,
the rest of a Go crash dump, Node's version line). Which limit a final error names is
read from its words, so it is what the server says, never what the kernel says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

# What runtimes write when a call failed at a limit (lower case): Python's exceptions,
# Node's errors and fatal errors, Go's runtime, the JVM, C++ and Rust, the shells.
SAYS: Final = {
    "memory": (
        "memoryerror",
        "out of memory",
        "outofmemoryerror",
        "cannot allocate memory",
        "bad_alloc",
        "allocation failed",
        "memory allocation of",
        "enomem",
    ),
    "processes": (
        "resource temporarily unavailable",
        "eagain",
        "cannot fork",
        "can't fork",
        "fork: retry",
        "blockingioerror",
        "failed to create new os thread",
        "unable to create native thread",
    ),
    "open_files": ("too many open files", "emfile"),
}

# What runtimes write after the error itself: stack frames are indented (Python's,
# Node's, the JVM's, a C++ exception's what()); Node ends an error object's dump with a
# brace and then its version; ``go run`` adds the exit status.
_AFTER: Final = re.compile(r"\s|[{}\[\]()]*$|Node\.js v\d|exit status \d+$")
# A Go crash dump follows its error: the goroutines, the runtime's own stack, and
# before them the signal and registers of a crash in native code.
_GO_DUMP: Final = re.compile(r"goroutine \d+ \[|runtime stack:$")
_GO_SIGNAL: Final = re.compile(r"PC=|SIG[A-Z]+: |signal arrived |\[signal ")


def final_error(stderr: Sequence[str]) -> list[str]:
    """The lines of ``stderr``'s tail that form the error the server died of (empty when
    none is seen): the last line but for what runtimes write after an error, and, for
    a Go ``fatal error``, the ``runtime:`` lines that explain it just above."""
    lines = list(stderr)
    dump = next((i for i, line in enumerate(lines) if _GO_DUMP.match(line)), None)
    if dump is not None:
        lines = [line for line in lines[:dump] if not _GO_SIGNAL.match(line)]
    while lines and _AFTER.match(lines[-1]):
        lines.pop()
    if not lines:
        return []
    end = len(lines) - 1
    start = end
    if lines[end].startswith("fatal error:"):
        while start > 0 and lines[start - 1].startswith("runtime:"):
            start -= 1
    return lines[start:]


def limit_said(stderr: Sequence[str], names: Sequence[str]) -> str | None:
    """Which of the limits ``names`` the server's final error says it ran into."""
    said = "\n".join(final_error(stderr)).lower()
    if not said:
        return None
    return next((n for n in names if any(w in said for w in SAYS.get(n, ()))), None)
