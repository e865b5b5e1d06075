"""The filesystems a sandbox makes of its own, as bubblewrap arguments: a ``/dev`` and a
``/proc`` with the kernel's controls in them read-only, and the bounds on what a server
keeps in memory through the filesystems bubblewrap makes out of it. Sans-IO.

bubblewrap makes a tmpfs for the sandbox's ``/dev``, for each empty directory that
covers a hidden one, and for a strict sandbox's root and its ``/tmp``; the server owns
each one's root, so even one made read-only by its mode is the server's to open up
again. What it writes there is memory that no limit of its own counts, nor the
kernel's out-of-memory killer when it picks a process to end, and it stays until the
server stops. So the two that programs write to by design are sized at the server's
memory limit (``--size``): ``/dev/shm``, a tmpfs of its own for POSIX shared memory,
and a strict sandbox's ``/tmp``. The others are remounted read-only once everything
below them is mounted (``sealed``): the mounts inside them keep their own mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# Shown read-only under the sandbox's own /proc, where they exist: the kernel's
# settings (kernel.core_pattern runs a program as root, in no namespace, at the next
# crash), the sysrq trigger (reboot, halt), interrupts' routing, devices' PCI
# configuration, filesystems' and ACPI's controls.
KERNEL_PROC: Final = (
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
    "/proc/acpi",
)


def tmpfs(path: str, size: int | None) -> list[str]:
    """A tmpfs at ``path`` holding at most ``size`` bytes (None: as much as the kernel
    gives one, half of the machine's memory)."""
    bound = ["--size", str(size)] if size is not None else []
    return [*bound, "--tmpfs", path]


# The directories bubblewrap makes of its own in every sandbox.
KERNEL_DIRS: Final = ("/dev", "/proc", "/sys")


def kernel_mounts(shows_sys: bool, shm_size: int | None) -> list[str]:
    """``/dev`` and ``/proc`` of the sandbox's own, with the kernel's controls in them
    (and in ``/sys``, when the sandbox shows the host's) read-only, and a ``/dev/shm``
    holding at most ``shm_size`` bytes. ``/dev`` is left writable for what is mounted
    in it after: ``sealed`` closes it."""
    args = ["--ro-bind-try", "/sys", "/sys"] if shows_sys else []
    args += ["--dev", "/dev", *tmpfs("/dev/shm", shm_size), "--proc", "/proc"]
    for path in KERNEL_PROC:
        args += ["--ro-bind-try", path, path]
    return args


def sealed(paths: Sequence[str]) -> list[str]:
    """The filesystems mounted at ``paths`` remounted read-only: after every mount,
    since no mount point can be made in them then. Each alone: what is mounted inside
    one keeps its own mode."""
    args = []
    for path in paths:
        args += ["--remount-ro", path]
    return args
