"""Boot a real systemd (Debian bookworm, systemd-nspawn) and run a check inside it.

The rootfs is built once per machine with debootstrap and cached; each run boots a
throw-away overlay of it, so runs never change the cache and can run in parallel::

    rootfs = harness.ensure_rootfs()          # ~1 min the first time, then instant
    m = harness.Machine(rootfs)
    m.install_mcpd()                          # this repo's packages + /usr/local/bin/mcpd
    m.add_unit(ROOT / "systemd/mcpd.service")
    m.add_file("/etc/mcpd/config.toml", text="...")
    result = m.run("systemctl start mcpd && journalctl -u mcpd MCPD_EVENT=outage", timeout=120)
    assert result.rc == 0, result.report()

The check is a shell script (or any file starting with ``#!``) run as root once
``systemctl is-system-running --wait`` returns. Needs root. ``skip_reason()`` says why
a machine cannot run it. Also a command line: ``python -m tests.systemd.harness build``.

How it works, and why (see also the comments below):
- nspawn needs ``--register=no --keep-unit`` when the host's PID 1 is not systemd, and
  makes ``payload``/``supervisor`` cgroups under the caller's: each run therefore starts
  in its own ``mcpd-harness-<id>`` cgroup, which is also how a stuck run is killed.
- The run gets a private mount namespace (``unshare``) holding the overlay and a tmpfs on
  ``/run/systemd/nspawn``; all mounts vanish with it.
- The runner unit is ``Type=exec``: a oneshot unit in the boot transaction that waits for
  the boot to finish would wait for itself.
- Stopping escalates: SIGTERM to nspawn (orderly poweroff), then kill the container's
  ``payload`` cgroup (nspawn then exits by itself), then kill everything in the run's
  cgroup. Killing nspawn first would orphan the container's init.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = os.environ.get("MCPD_TEST_SUITE", "bookworm")
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-venv",
    "procps",
    "libpam-systemd",
    "bubblewrap",  # the stdio servers' sandbox
)
VENV = "/opt/mcpd-venv"  # in the rootfs: python with mcpd's runtime dependencies
# Wheels of the runtime and build dependencies, so that `pip install .` works offline in
# the container (PIP_NO_INDEX=1 PIP_FIND_LINKS=WHEELHOUSE), as the README's install does.
WHEELHOUSE = "/opt/wheels"
RECIPE_VERSION = 2  # bump when the build steps change, to rebuild cached rootfs trees
# Timers and gettys only add noise and load to short test boots.
MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
    "console-getty.service",
    "getty@.service",
    "systemd-firstboot.service",
)


class HarnessError(RuntimeError):
    """The harness itself (not the check) failed."""


def _log(msg: str) -> None:
    print(f"[harness] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise HarnessError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{tail}")
    return proc  # type: ignore[no-any-return]


# --- host prerequisites ------------------------------------------------------------------


def skip_reason() -> str | None:
    """Why this machine cannot boot a container, or None when it can (maybe after apt)."""
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn, mounts, cgroups)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    if not shutil.which("unshare"):
        return "unshare (util-linux) is missing"
    tools = shutil.which("systemd-nspawn") and shutil.which("debootstrap")
    if not tools and not shutil.which("apt-get"):
        return "systemd-nspawn/debootstrap missing and no apt-get to install them"
    if not _cgroup_roots():
        return "no usable cgroup hierarchy under /sys/fs/cgroup"
    return None


def ensure_host_tools() -> None:
    """Install systemd-nspawn and debootstrap with apt when missing. (On Debian this can
    also upgrade the host's systemd packages, which systemd-container must match.)"""
    if shutil.which("systemd-nspawn") and shutil.which("debootstrap"):
        return
    with _locked(_cache_dir() / "apt.lock"):
        if shutil.which("systemd-nspawn") and shutil.which("debootstrap"):
            return
        _log("installing systemd-container and debootstrap with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-q"], env=env, stdin=subprocess.DEVNULL, timeout=600)
        _run(
            ["apt-get", "install", "-y", "-q", "systemd-container", "debootstrap"],
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )


# --- the cached rootfs ---------------------------------------------------------------------


def _cache_dir() -> Path:
    base = os.environ.get("MCPD_TEST_CACHE") or os.path.expanduser("~/.cache/mcpd-tests")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _mirror() -> str:
    """The host's Debian mirror (one-line or deb822 sources), else deb.debian.org."""
    if os.environ.get("MCPD_TEST_MIRROR"):
        return os.environ["MCPD_TEST_MIRROR"]
    files = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for f in files:
        with contextlib.suppress(OSError):
            for m in re.finditer(
                r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+)", f.read_text(), re.M
            ):
                uri = m.group(1).rstrip("/")
                if uri.endswith("/debian"):
                    return uri
    return "http://deb.debian.org/debian"


def runtime_requirements() -> list[str]:
    """mcpd's run-time dependencies, as pyproject.toml declares them."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def build_requirements() -> list[str]:
    """What building mcpd needs (pyproject.toml's build-system.requires)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["build-system"]["requires"])


@dataclass(frozen=True)
class Rootfs:
    path: Path
    key: str
    site_packages: str  # of VENV, inside the rootfs

    @property
    def python(self) -> str:
        return f"{VENV}/bin/python"


def ensure_rootfs(cache_dir: Path | None = None) -> Rootfs:
    """The cached rootfs, built first if needed (under a lock, so concurrent callers wait
    for one build). Its key covers everything that goes into it."""
    ensure_host_tools()
    cache = cache_dir or _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    mirror = _mirror()
    reqs = runtime_requirements()
    key_src = json.dumps([RECIPE_VERSION, SUITE, mirror, PACKAGES, reqs, build_requirements()])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:12]
    final = cache / f"rootfs-{SUITE}-{key}"
    meta = final / ".mcpd-harness.json"
    with _locked(cache / f"rootfs-{key}.lock"):
        if not meta.exists():
            start = time.monotonic()
            _build(final, mirror, reqs)
            _log(f"rootfs built in {time.monotonic() - start:.1f}s: {final}")
    return Rootfs(final, key, json.loads(meta.read_text())["site_packages"])


def _build(final: Path, mirror: str, reqs: list[str]) -> None:
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(final, ignore_errors=True)
    # A tree that debootstrap finished is kept for a retry when a later step fails.
    if not (tmp / ".debootstrap-done").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        _log(f"debootstrap {SUITE} from {mirror} (about a minute)")
        include = ",".join(PACKAGES)
        _run(
            ["debootstrap", "--variant=minbase", f"--include={include}", SUITE, str(tmp), mirror],
            stdin=subprocess.DEVNULL,
            timeout=1200,
        )
        (tmp / ".debootstrap-done").touch()
    units = tmp / "etc/systemd/system"
    for unit in MASKED_UNITS:
        (units / unit).unlink(missing_ok=True)
        (units / unit).symlink_to("/dev/null")
    (units / "default.target").unlink(missing_ok=True)
    (units / "default.target").symlink_to("/lib/systemd/system/multi-user.target")
    (tmp / "var/log/journal").mkdir(parents=True, exist_ok=True)  # persistent: readable after
    # pip runs in a chroot with network access. An intercepting proxy's CA is trusted by the
    # host's bundle only, so the host's /etc/ssl/certs is bind-mounted read-only for this
    # step (and the host's PIP_*/SSL_* variables are passed on).
    script = f"""
        set -eu
        R="$1"
        shift
        mkdir -p "$R/etc/ssl/certs"
        mount --bind /etc/ssl/certs "$R/etc/ssl/certs"
        mount -o remount,bind,ro "$R/etc/ssl/certs"
        mount -t proc proc "$R/proc"
        mount --rbind /dev "$R/dev"
        cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
        rm -rf "$R{VENV}"
        chroot "$R" /usr/bin/python3 -m venv {VENV}
        chroot "$R" {VENV}/bin/pip install -q --no-cache-dir "$@"
        chroot "$R" {VENV}/bin/pip download -q --no-cache-dir -d {WHEELHOUSE} \
            -r /tmp/wheelhouse-requirements.txt
        rm "$R/tmp/wheelhouse-requirements.txt"
        chroot "$R" {VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))'
    """
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    (tmp / "tmp/wheelhouse-requirements.txt").write_text("\n".join(reqs + build_requirements()))
    out = _run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            str(tmp),
            *reqs,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )
    site = out.stdout.strip().splitlines()[-1]
    shutil.rmtree(tmp / "var/lib/apt/lists", ignore_errors=True)
    (tmp / "var/lib/apt/lists/partial").mkdir(parents=True)
    shutil.rmtree(tmp / "var/cache/apt/archives", ignore_errors=True)
    (tmp / "var/cache/apt/archives/partial").mkdir(parents=True)
    (tmp / ".debootstrap-done").unlink()
    (tmp / ".mcpd-harness.json").write_text(json.dumps({"site_packages": site}))
    tmp.rename(final)


# --- cgroups ---------------------------------------------------------------------------------


def _cgroup_roots() -> list[Path]:
    """Hierarchies to put a run in: the unified one alone on a cgroup2 host; on a hybrid
    host both cgroup2 (``unified``, which has cgroup.kill) and ``name=systemd``."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return [base / n for n in ("unified", "systemd") if (base / n / "cgroup.procs").exists()]


def _cgroup_pids(path: Path) -> list[int]:
    pids: list[int] = []
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (Path(dirpath) / "cgroup.procs").read_text().split()]
    return pids


def _kill_cgroup(path: Path) -> None:
    if not path.exists():
        return
    if (path / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            (path / "cgroup.kill").write_text("1")
            return
    for pid in _cgroup_pids(path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _remove_cgroup(path: Path, wait: float = 10.0) -> None:
    deadline = time.monotonic() + wait
    while path.exists():
        for dirpath, _dirs, _files in os.walk(path, topdown=False):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)
        if not path.exists() or time.monotonic() > deadline:
            break
        _kill_cgroup(path)
        time.sleep(0.1)
    if path.exists():
        _log(f"warning: could not remove cgroup {path}")


# --- a run -----------------------------------------------------------------------------------

RUNNER_UNIT = """\
[Unit]
Description=mcpd test harness: run the check once the boot is finished

[Service]
# exec, not oneshot: a oneshot unit is part of the boot it would be waiting for.
Type=exec
ExecStart=/bin/bash /harness/runner.sh
StandardOutput=journal+console
StandardError=journal+console
"""

RUNNER_SH = """\
out=/harness-out
state=$(systemctl is-system-running --wait 2>&1)
{ echo "state: $state"; systemd-analyze 2>&1; systemctl --failed --no-legend --plain 2>&1; } \
    > $out/boot.txt
set -a; . /harness/env; set +a
cd /harness
run=(bash /harness/check)
if [ "$(head -c2 /harness/check)" = '#!' ]; then run=(/harness/check); fi
timeout --kill-after=5 "$CHECK_TIMEOUT" "${run[@]}" 2>&1 | tee $out/check.log
rc=${PIPESTATUS[0]}
echo $rc > $out/rc.tmp && mv $out/rc.tmp $out/rc
timeout 20 journalctl -b --no-pager -o short-precise > $out/journal.txt 2>&1
sync
systemctl poweroff --no-block
"""

# Runs in the run's cgroup, then in a private mount namespace: overlay + nspawn. nspawn
# filters the container's system calls on top of the units' own filters; the Landlock
# calls, which a service on a host reaches through its unit alone, are let through it.
LAUNCH_SH = """\
for cg in $RUN_CGROUPS; do echo $$ > "$cg/cgroup.procs"; done
exec unshare --mount --propagation private /bin/sh -euc '
    mount -t overlay overlay "$WORK/root" \
        -o "lowerdir=$LOWER,upperdir=$WORK/upper,workdir=$WORK/ovl"
    mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn
    if [ -n "$ENABLE" ]; then systemctl --root="$WORK/root" --quiet enable $ENABLE; fi
    exec systemd-nspawn -D "$WORK/root" --boot --register=no --keep-unit \
        --console=read-only --link-journal=no --machine="$MACHINE" \
        --system-call-filter="landlock_create_ruleset landlock_restrict_self" \
        --bind="$WORK/out:/harness-out" "$@"
' sh "$@"
"""


@dataclass
class RunResult:
    rc: int  # the check's exit status; 124 on timeout
    check_log: str
    journal: str
    console: str
    boot: str
    duration: float
    timed_out: bool
    warnings: list[str] = field(default_factory=list)
    run_id: str = ""  # in the names of the run's cgroups and work directory

    def report(self, journal_lines: int = 80) -> str:
        """A failure message: the check's output, boot state, and the journal's tail."""
        tail = "\n".join(self.journal.splitlines()[-journal_lines:])
        text = (
            f"rc={self.rc} timed_out={self.timed_out} after {self.duration:.1f}s "
            f"{' '.join(self.warnings)}\n--- check ---\n{self.check_log}\n--- boot ---\n"
            f"{self.boot}\n--- journal (tail) ---\n{tail}"
        )
        if not self.boot:  # never booted far enough: nspawn's own output says why
            text += f"\n--- console (tail) ---\n{self.console[-3000:]}"
        return text


@dataclass
class _Staged:
    dest: str  # absolute path in the container
    src: Path | None = None
    data: bytes | None = None
    mode: int = 0o644


class Machine:
    """One container boot: stage files and units, then ``run(check)``."""

    def __init__(self, rootfs: Rootfs) -> None:
        self.rootfs = rootfs
        self._staged: list[_Staged] = []
        self._enable: list[str] = []
        self._binds: list[str] = []
        self.env: dict[str, str] = {}

    def add_file(
        self, dest: str, src: Path | None = None, *, text: str | None = None, mode: int = 0o644
    ) -> None:
        if (src is None) == (text is None):
            raise ValueError("give src or text")
        data = text.encode() if text is not None else None
        self._staged.append(_Staged(dest, src, data, mode))

    def add_tree(self, src: Path, dest: str) -> None:
        self._staged.append(_Staged(dest, src))

    def add_unit(self, unit: Path | str, *, text: str | None = None, enable: bool = False) -> None:
        """A unit file (``Path``), a drop-in directory such as ``x.service.d`` (``Path``),
        or a unit named ``unit`` with contents ``text``; into /etc/systemd/system."""
        name = unit.name if isinstance(unit, Path) else unit
        dest = f"/etc/systemd/system/{name}"
        if text is not None:
            self.add_file(dest, text=text)
        elif isinstance(unit, Path) and unit.is_dir():
            self.add_tree(unit, dest)
        else:
            self.add_file(dest, Path(unit))
        if enable:
            self._enable.append(name)

    def bind_ro(self, src: Path, dest: str) -> None:
        """Host directory or file ``src`` visible read-only at ``dest``, for what is too big
        to copy into every run (a Node runtime and its packages)."""
        if ":" in f"{src}{dest}":
            raise ValueError("systemd-nspawn cannot bind a path with ':' in it")
        self._binds.append(f"--bind-ro={src.resolve()}:{dest}")

    def install_mcpd(self, source: Path = ROOT, *, command: bool = True) -> None:
        """This checkout's packages on the rootfs venv's path, and with ``command``
        ``/usr/local/bin/mcpd`` (where the shipped unit expects the console script)
        running ``mcpd.cli:main``."""
        for pkg in ("mcpd", "protocol", "transports"):
            self.add_tree(source / pkg, f"/opt/mcpd/src/{pkg}")
        self.add_file(f"{self.rootfs.site_packages}/mcpd-src.pth", text="/opt/mcpd/src\n")
        if not command:
            return
        wrapper = f"#!{VENV}/bin/python\nimport sys\nfrom mcpd.cli import main\nsys.exit(main())\n"
        self.add_file("/usr/local/bin/mcpd", text=wrapper, mode=0o755)

    def add_checkout(self, dest: str = "/src/mcpd", source: Path = ROOT) -> None:
        """The files of this checkout that installing mcpd from source uses (``pip install .``
        and the unit files), at ``dest``."""
        for name in ("pyproject.toml", "README.md"):
            self.add_file(f"{dest}/{name}", source / name)
        for tree in ("mcpd", "protocol", "transports", "systemd"):
            self.add_tree(source / tree, f"{dest}/{tree}")

    def run(
        self,
        check: str,
        *,
        timeout: float = 300,
        check_timeout: float | None = None,
        keep: bool = False,
    ) -> RunResult:
        """Boot, run ``check``, power off, clean up; all within ``timeout`` seconds. The
        check itself is stopped after ``check_timeout`` (default: ``timeout`` - 30 s, at
        least 10 s) so that the journal can still be collected in order."""
        if check_timeout is None:
            check_timeout = max(10.0, timeout - 30)
        run_id = uuid.uuid4().hex[:10]
        work = Path(tempfile.mkdtemp(prefix=f"mcpd-harness.{run_id}."))
        cgroups = [root / f"mcpd-harness-{run_id}" for root in _cgroup_roots()]
        start = time.monotonic()
        warnings: list[str] = []
        timed_out = False
        try:
            for sub in ("upper", "ovl", "root", "out"):
                (work / sub).mkdir()
            self._stage(work / "upper", check, check_timeout)
            for cg in cgroups:
                cg.mkdir()
            env = {
                **os.environ,
                "RUN_CGROUPS": " ".join(map(str, cgroups)),
                "LOWER": str(self.rootfs.path),
                "WORK": str(work),
                "ENABLE": " ".join(self._enable),
                "MACHINE": f"mcpd-{run_id}",
            }
            with open(work / "console.log", "wb") as console:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", LAUNCH_SH, "sh", *self._binds],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=console,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                try:
                    timed_out = self._wait(proc, work / "out" / "rc", start + timeout, warnings)
                finally:
                    if proc.poll() is None:
                        _stop(proc, cgroups, warnings)
            result = self._collect(work, time.monotonic() - start, timed_out, warnings)
            result.run_id = run_id
            return result
        finally:
            for cg in cgroups:
                _kill_cgroup(cg)
            for cg in cgroups:
                _remove_cgroup(cg)
            if keep:
                _log(f"kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)

    def _stage(self, upper: Path, check: str, check_timeout: float) -> None:
        items = list(self._staged)
        items.append(
            _Staged("/etc/systemd/system/mcpd-harness-runner.service", None, RUNNER_UNIT.encode())
        )
        items.append(_Staged("/harness/runner.sh", None, RUNNER_SH.encode(), 0o755))
        items.append(_Staged("/harness/check", None, check.encode(), 0o755))
        env = {**self.env, "CHECK_TIMEOUT": str(int(check_timeout))}
        env_text = "".join(f"{k}={_shell_quote(v)}\n" for k, v in env.items())
        items.append(_Staged("/harness/env", None, env_text.encode()))
        for item in items:
            target = upper / item.dest.lstrip("/")
            self._make_parents(upper, target.parent)
            if item.src is not None and item.src.is_dir():
                shutil.copytree(
                    item.src,
                    target,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"),
                )
            elif item.src is not None:
                shutil.copyfile(item.src, target)
                os.chmod(target, item.mode | (os.stat(item.src).st_mode & 0o111))
            else:
                assert item.data is not None
                target.write_bytes(item.data)
                os.chmod(target, item.mode)
        wants = upper / "etc/systemd/system/multi-user.target.wants"
        self._make_parents(upper, wants)
        (wants / "mcpd-harness-runner.service").symlink_to("../mcpd-harness-runner.service")

    def _make_parents(self, upper: Path, directory: Path) -> None:
        """Create ``directory`` in the upper layer with the lower layer's owner and mode:
        an upper directory's attributes win over the one it covers."""
        missing = []
        d = directory
        while not d.exists() and d != upper:
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            d.mkdir()
            lower = self.rootfs.path / d.relative_to(upper)
            if lower.is_dir():
                st = lower.stat()
                os.chown(d, st.st_uid, st.st_gid)
                os.chmod(d, st.st_mode & 0o7777)
            else:
                os.chmod(d, 0o755)

    @staticmethod
    def _wait(
        proc: subprocess.Popen[bytes], rc_file: Path, deadline: float, warnings: list[str]
    ) -> bool:
        """Wait for the container to exit; True when the hard timeout hit. Once the check
        has finished, poweroff gets 15 s before it is forced."""
        grace_end: float | None = None
        while True:
            try:
                proc.wait(timeout=0.1)
                return False
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if grace_end is None and rc_file.exists():
                grace_end = now + 15
            if grace_end is not None and now > grace_end:
                warnings.append("container did not power off within 15 s of the check; forced")
                return False
            if now > deadline:
                return True

    @staticmethod
    def _collect(work: Path, duration: float, timed_out: bool, warnings: list[str]) -> RunResult:
        out = work / "out"

        def read(path: Path) -> str:
            with contextlib.suppress(OSError):
                return path.read_text(errors="replace")
            return ""

        journal = read(out / "journal.txt")
        journals = sorted((work / "upper/var/log/journal").glob("*"))
        if not journal and journals:  # the runner never got there: read the journal files
            cmd = ["journalctl", "--no-pager", "-o", "short-precise", "-D", str(journals[0])]
            with contextlib.suppress(Exception):
                journal = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        rc_text = read(out / "rc").strip()
        if rc_text:
            rc = int(rc_text)
        elif timed_out:
            rc = 124
        else:
            rc = 125
            warnings.append("the container exited without running the check to its end")
        return RunResult(
            rc=rc,
            check_log=read(out / "check.log"),
            journal=journal,
            console=read(work / "console.log"),
            boot=read(out / "boot.txt"),
            duration=duration,
            timed_out=timed_out,
            warnings=warnings,
        )


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def _stop(proc: subprocess.Popen[bytes], cgroups: list[Path], warnings: list[str]) -> None:
    """SIGTERM nspawn (the container powers off in order); then kill the container's
    payload cgroup so nspawn can reap its init and exit; then kill everything."""
    steps: list[tuple[str, float]] = [("term", 10.0), ("payload", 5.0), ("all", 5.0)]
    for step, wait in steps:
        if step == "term":
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        else:
            warnings.append(f"escalated: killed {step} cgroup")
            for cg in cgroups:
                _kill_cgroup(cg / "payload" if step == "payload" else cg)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    proc.wait()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.systemd.harness")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build (or find) the cached rootfs")
    run = sub.add_parser("run", help="boot and run a check script")
    run.add_argument("check", type=Path)
    run.add_argument("--unit", type=Path, action="append", default=[])
    run.add_argument("--enable", action="append", default=[])
    run.add_argument("--mcpd", action="store_true", help="install this checkout's mcpd")
    run.add_argument("--timeout", type=float, default=300)
    run.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if reason := skip_reason():
        print(f"cannot run: {reason}", file=sys.stderr)
        return 125
    rootfs = ensure_rootfs()
    if args.cmd == "build":
        print(rootfs.path)
        return 0
    machine = Machine(rootfs)
    for unit in args.unit:
        machine.add_unit(unit, enable=unit.name in args.enable)
    if args.mcpd:
        machine.install_mcpd()
    result = machine.run(args.check.read_text(), timeout=args.timeout, keep=args.keep)
    print(result.check_log, end="")
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return result.rc


if __name__ == "__main__":
    sys.exit(main())
