"""Where no grant may lead: the filesystems the kernel serves.

Every sandbox has a ``/dev``, a ``/proc`` and a ``/sys`` of its own (``mounts``), with
the kernel's controls in them read-only. A grant is bound at the path it leads to, after
them: one that led to the host's ``/proc`` would lay it over the sandbox's own,
read-write for a ``write`` grant, with every process of the host in it (mcpd's and the
other servers' command lines) and, under a root mcpd, the kernel's settings writable;
the host's ``/dev`` would bring its shared memory, and its ``/sys`` the cgroup tree. So
a grant that is, lies in or holds one of those directories, or a filesystem of the
kernel's mounted anywhere else (another mount of ``proc``, a cgroup tree), is refused,
whoever made the link that leads there. What ``/run`` holds is the host's files, not
the kernel's: mcpd's own places there are hidden (``grant_reach``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from .mounts import KERNEL_DIRS
from .plan import within

# Filesystems whose files are the kernel's state and controls, wherever mounted.
KERNEL_TYPES: Final = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "mqueue",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "bpf",
        "configfs",
        "pstore",
        "efivarfs",
        "binfmt_misc",
        "fusectl",
        "selinuxfs",
        "hugetlbfs",
        "nsfs",
        "rpc_pipefs",
        "nfsd",
    }
)

_MOUNTINFO: Final = "/proc/self/mountinfo"
_ESCAPED: Final = re.compile(r"\\([0-7]{3})")


class KernelMount(msgspec.Struct, frozen=True):
    """A filesystem of the kernel's, where mcpd sees it mounted."""

    path: str
    fstype: str


def parse_mountinfo(lines: Iterable[str]) -> list[KernelMount]:
    """The kernel's filesystems among the lines of a ``mountinfo`` file: the mount
    point is its fifth field (octal escapes for space, tab, newline and backslash),
    the type the first after the lone ``-``."""
    found = []
    for line in lines:
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        fstype = fields[fields.index("-", 6) + 1]
        if fstype in KERNEL_TYPES:
            path = _ESCAPED.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
            found.append(KernelMount(path, fstype))
    return found


def kernel_mounts_now() -> list[KernelMount]:
    """The kernel's filesystems as mcpd sees them mounted now (none where that cannot
    be read: the directories alone are then checked)."""
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as f:
            return parse_mountinfo(f)
    except OSError:
        return []


def kernel_reach(real: str, mounts: Sequence[KernelMount]) -> str | None:
    """How a grant that leads to ``real`` (a real path) reaches the kernel's
    filesystems, as a clause after where it leads ("which lies in /proc, ..."); None
    when it does not."""
    for place in KERNEL_DIRS:
        if within(real, place):
            how = "is" if real == place else "lies in"
            return f"which {how} {place}, the kernel's, of which every sandbox has its own"
    for m in mounts:
        if within(real, m.path):
            how = "is" if real == m.path else "lies in"
            return f"which {how} {m.path}, the kernel's ({m.fstype}, mounted there)"
        if within(m.path, real):
            return f"which holds {m.path}, the kernel's ({m.fstype}, mounted there)"
    return None


def kernel_refusal(written: str, real: str, reach: str) -> str:
    """Why a grant the config writes ``written``, which leads to ``real`` and reaches
    the kernel's filesystems as ``reach`` says, is not bound."""
    lead = f"{written} leads to {real}" if real != written else written
    said = f"{lead}, {reach}: no grant shows a server the kernel's filesystems of the host"
    if real == written:
        return said
    return said + "; remove the link or point it elsewhere (a server may have made it)"
