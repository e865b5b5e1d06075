"""No grant leads to the kernel's filesystems: ``/proc``, ``/sys``, ``/dev`` and what
lies in them, another mount of one of them, or a folder that holds such a mount."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from transports.stdio.sandbox import host
from transports.stdio.sandbox.kernel_places import (
    KernelMount,
    kernel_reach,
    kernel_refusal,
    parse_mountinfo,
)
from transports.stdio.sandbox.plan import Level, Mount, Sandbox, SandboxError

ROOT = Path(__file__).resolve().parents[4]
MOUNTINFO = [
    "22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n",
    "23 1 0:22 / /sys rw,nosuid shared:6 - sysfs sysfs rw\n",
    "24 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
    "90 24 0:21 / /srv/host\\040proc rw master:5 - proc proc rw\n",
    "91 24 0:40 / /run/netns/blue rw - nsfs nsfs rw\n",
    "92 24 0:41 / /srv/cache rw - tmpfs tmpfs rw\n",
]


def test_the_kernels_filesystems_are_found_where_they_are_mounted() -> None:
    assert parse_mountinfo(MOUNTINFO) == [
        KernelMount("/proc", "proc"),
        KernelMount("/sys", "sysfs"),
        KernelMount("/srv/host proc", "proc"),
        KernelMount("/run/netns/blue", "nsfs"),
    ]


@pytest.mark.parametrize(
    ("real", "how"),
    [
        ("/proc", "which is /proc, the kernel's"),
        ("/proc/sys/kernel", "which lies in /proc, the kernel's"),
        ("/proc/1", "which lies in /proc, the kernel's"),
        ("/sys/fs/cgroup", "which lies in /sys, the kernel's"),
        ("/dev", "which is /dev, the kernel's"),
        ("/dev/shm", "which lies in /dev, the kernel's"),
        ("/srv/host proc/self", "which lies in /srv/host proc, the kernel's (proc, mounted there)"),
        ("/run", "which holds /run/netns/blue, the kernel's (nsfs, mounted there)"),
    ],
)
def test_a_grant_that_reaches_the_kernels_filesystems_is_named_with_how(
    real: str, how: str
) -> None:
    reach = kernel_reach(real, parse_mountinfo(MOUNTINFO))
    assert reach is not None and reach.startswith(how), reach


@pytest.mark.parametrize("real", ["/srv/cache", "/srv/other", "/home/u/notes", "/device", "/procs"])
def test_other_places_are_granted(real: str) -> None:
    assert kernel_reach(real, parse_mountinfo(MOUNTINFO)) is None


def test_the_refusal_says_to_remove_a_link_only_for_a_link() -> None:
    reach = "which is /proc, the kernel's, of which every sandbox has its own"
    linked = kernel_refusal("/home/u/notes", "/proc", reach)
    assert linked.startswith("/home/u/notes leads to /proc, which is /proc")
    assert "remove the link" in linked
    named = kernel_refusal("/proc", "/proc", reach)
    assert named.startswith("/proc, which is /proc") and "link" not in named


def sandbox(tmp: Path, level: Level = "default", **paths: tuple[str, ...]) -> Sandbox:
    home = str(tmp / "state" / "mcpd" / "homes" / "s")
    return Sandbox(level=level, home=home, alias="s", where="servers.s", **paths)


@pytest.mark.parametrize("kernel", ["/proc", "/proc/sys", "/sys", "/dev"])
@pytest.mark.parametrize("level", ["default", "strict"])
def test_a_grant_repointed_into_the_kernels_filesystems_is_refused(
    tmp_path: Path, kernel: str, level: Level
) -> None:
    tmp = Path(os.path.realpath(tmp_path))
    (tmp / "data").mkdir()
    notes = tmp / "notes"
    notes.symlink_to(tmp / "data")
    box = sandbox(tmp, level, write=(str(notes),))
    assert host.grants(box) == [Mount(str(tmp / "data"), "write", str(notes))]
    notes.unlink()
    notes.symlink_to(kernel)
    with pytest.raises(SandboxError) as error:
        host.grants(box)
    said = str(error.value)
    assert said.startswith(f"servers.s.write[0]: {notes} leads to {kernel}, which "), said
    assert "the kernel's" in said and "remove the link" in said


def test_a_server_started_without_a_sandbox_keeps_its_grants_as_they_are(
    tmp_path: Path,
) -> None:
    box = sandbox(tmp_path, "off", read=("/proc",))
    assert host.grants(box) == [Mount("/proc", "read")]


GRANTS = """
import sys
from transports.stdio.sandbox import host
from transports.stdio.sandbox.plan import Sandbox, SandboxError
for path in sys.argv[2:]:
    box = Sandbox(home=sys.argv[1], alias="s", where="servers.s", read=(path,))
    try:
        host.grants(box)
        print("granted")
    except SandboxError as exc:
        print(exc)
"""


def test_another_mount_of_proc_is_found_by_what_it_is(tmp_path: Path) -> None:
    """A folder where ``proc`` is mounted again, or one that holds it, is refused as
    ``/proc`` is, in a mount namespace of the test's own."""
    tmp = Path(os.path.realpath(tmp_path))
    place = tmp / "srv" / "host proc"
    place.mkdir(parents=True)
    script = 'mount --make-rprivate / && mount --bind /proc "$1" && shift && exec "$@"'
    argv = ["unshare", "--mount", "sh", "-c", script, "sh", str(place), sys.executable]
    argv += ["-c", GRANTS, str(tmp / "home"), str(place / "self"), str(tmp / "srv")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    if done.returncode != 0:
        pytest.skip(f"cannot mount proc again here: {done.stderr.strip()}")
    inside, above = done.stdout.splitlines()
    assert inside.startswith(f"servers.s.read[0]: {place / 'self'} leads to {place}/"), inside
    assert f"which lies in {place}, the kernel's (proc, mounted there)" in inside
    assert above.startswith(f"servers.s.read[0]: {tmp / 'srv'}, which holds {place}"), above
