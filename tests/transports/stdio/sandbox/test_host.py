"""A sandbox's paths resolved on this machine, and what the machine offers, found once:
hidden paths that do not exist are left out and what lies in a hidden directory goes
with it, a grant that does not exist is an error naming its key, a grant through a
symlink keeps the link, a server's home is made private, and bubblewrap's own words
say why a machine cannot sandbox (the probe's bwrap is a script the test writes)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from transports.stdio.sandbox import anchors, host, landlock
from transports.stdio.sandbox.plan import Mount, Sandbox, SandboxError

Paths = tuple[str, ...]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """The test's directory as the sandbox finds it (symlinks resolved)."""
    return Path(os.path.realpath(tmp_path))


def sandbox(tmp: Path, *, hide: Paths = (), read: Paths = (), write: Paths = ()) -> Sandbox:
    home = str(tmp / "homes" / "s")
    return Sandbox(home=home, hide=hide, read=read, write=write, alias="s", where="servers.s")


def mounts(tmp: Path, *, hide: Paths = (), read: Paths = (), write: Paths = ()) -> list[Mount]:
    """What is hidden and granted (the directories above what is hidden apart)."""
    found = host.resolve(sandbox(tmp, hide=hide, read=read, write=write), "/bin/true")
    return [m for m in found.mounts if m.kind != "fixed"]


# -- resolving a sandbox's paths --


def test_hidden_paths_are_hidden_as_what_they_are_and_missing_ones_left_out(
    tmp: Path,
) -> None:
    (tmp / "secrets").mkdir()
    (tmp / "token").write_text("x")
    hide = (str(tmp / "secrets"), str(tmp / "token"), str(tmp / "missing"))
    assert mounts(tmp, hide=hide) == [
        Mount(str(tmp / "secrets"), "hide_dir"),
        Mount(str(tmp / "token"), "hide_file"),
    ]


def test_a_hidden_pattern_hides_what_matches_it_as_each_server_starts(tmp: Path) -> None:
    (tmp / "ssh-one").mkdir()
    (tmp / "ssh-one" / "agent.1").write_text("")
    hide = (str(tmp / "ssh-*"),)
    assert mounts(tmp, hide=hide) == [Mount(str(tmp / "ssh-one"), "hide_dir")]
    (tmp / "ssh-two").mkdir()  # an agent started since
    assert mounts(tmp, hide=hide) == [
        Mount(str(tmp / "ssh-one"), "hide_dir"),
        Mount(str(tmp / "ssh-two"), "hide_dir"),
    ]


def test_a_hidden_symlink_hides_what_it_points_to(tmp: Path) -> None:
    (tmp / "real").mkdir()
    (tmp / "link").symlink_to(tmp / "real")
    assert mounts(tmp, hide=(str(tmp / "link"),)) == [Mount(str(tmp / "real"), "hide_dir")]


def test_a_hidden_link_to_what_the_server_runs_or_works_in_is_not_hidden_from_it(
    tmp: Path,
) -> None:
    """Links a server made at credential stores' names, to the others' virtualenv and
    project: each server keeps what it runs and works in; a store elsewhere is hidden."""
    for d in ("venv/bin", "project/src", "keys"):
        (tmp / d).mkdir(parents=True)
    (tmp / "venv" / "bin" / "python").symlink_to(sys.executable)
    for name, target in ((".kube", "venv"), (".docker", "project"), (".aws", "keys")):
        (tmp / name).symlink_to(tmp / target)
    hide = (str(tmp / ".kube"), str(tmp / ".docker"), str(tmp / ".aws"))
    anchors.forget_all()
    try:
        found = host.resolve(
            sandbox(tmp, hide=hide), str(tmp / "venv" / "bin" / "python"), str(tmp / "project/src")
        )
        hidden = [m for m in found.mounts if m.kind.startswith("hide")]
        assert hidden == [Mount(str(tmp / "keys"), "hide_dir")]
        said = anchors.notices()
        assert [n.split(",", 1)[1].split(":")[0] for n in said] == [
            f" which is or holds the working directory of servers.s ({tmp / 'project/src'})",
            f" which is or holds the command of servers.s ({tmp / 'venv/bin/python'})",
        ]
        # Another server, which needs neither, cannot see them.
        found = host.resolve(sandbox(tmp, hide=hide), "/bin/true")
        assert sorted(m.path for m in found.mounts if m.kind.startswith("hide")) == [
            str(tmp / "keys"),
            str(tmp / "project"),
            str(tmp / "venv"),
        ]
    finally:
        anchors.forget_all()


@pytest.mark.parametrize("swapped", ["cwd", "command"])
def test_a_server_whose_cwd_or_command_leads_into_a_linked_store_through_a_link_is_refused(
    tmp: Path, swapped: str
) -> None:
    """What a server can do between its starts: swap its working directory, or the
    folder its command is found in, for a link into ``~/.aws`` (kept elsewhere)."""
    keys = tmp / "dotfiles" / "aws"
    keys.mkdir(parents=True)
    shutil.copy("/bin/true", keys / "true")  # what the command would find there
    (tmp / ".aws").symlink_to(keys)
    (tmp / "proj").symlink_to(keys)
    (tmp / "tools").symlink_to(keys)
    cwd, command = str(tmp / "homes" / "s"), "/bin/true"
    if swapped == "cwd":
        cwd = str(tmp / "proj")
    else:
        command = str(tmp / "tools" / "true")
    anchors.forget_all()
    try:
        with pytest.raises(SandboxError) as refused:
            host.resolve(sandbox(tmp, hide=(str(tmp / ".aws"),)), command, cwd)
        said = str(refused.value)
        assert said.startswith(f"{tmp / '.aws'} is a symbolic link to {keys}, which mcpd hides")
        assert f"({cwd if swapped == 'cwd' else command}) leads into it" in said, said
        # A server that needs nothing there is not refused, and the store is hidden from it.
        assert mounts(tmp, hide=(str(tmp / ".aws"),)) == [Mount(str(keys), "hide_dir")]
    finally:
        anchors.forget_all()


def test_what_lies_in_a_hidden_directory_is_hidden_with_it_and_a_neighbour_is_not(
    tmp: Path,
) -> None:
    for d in ("data/inner", "data2"):
        (tmp / d).mkdir(parents=True)
    (tmp / "data" / "inner" / "f").write_text("x")
    (tmp / "data2" / "f").write_text("x")
    hide = (
        str(tmp / "data" / "inner" / "f"),
        str(tmp / "data"),
        str(tmp / "data" / "inner"),
        str(tmp / "data2" / "f"),  # "data2" starts with "data": not inside it
    )
    assert mounts(tmp, hide=hide) == [
        Mount(str(tmp / "data"), "hide_dir"),
        Mount(str(tmp / "data2" / "f"), "hide_file"),
    ]


def test_the_directories_above_what_is_hidden_are_kept_in_place(tmp: Path) -> None:
    (tmp / "state" / "mcpd").mkdir(parents=True)
    found = host.resolve(sandbox(tmp, hide=(str(tmp / "state" / "mcpd"),)), "/bin/true")
    fixed = [m.path for m in found.mounts if m.kind == "fixed"]
    assert str(tmp / "state") in fixed and str(tmp) in fixed
    assert str(tmp / "homes" / "s") not in fixed  # nothing hidden below it


def test_a_hidden_directory_moved_away_is_hidden_where_it_went(tmp: Path) -> None:
    (tmp / "lib" / "mcpd").mkdir(parents=True)
    hide = (str(tmp / "lib" / "mcpd"),)
    assert mounts(tmp, hide=hide) == [Mount(str(tmp / "lib" / "mcpd"), "hide_dir")]
    (tmp / "lib").rename(tmp / "lib.moved")
    (tmp / "lib" / "mcpd").mkdir(parents=True)  # what was left at its old path
    assert mounts(tmp, hide=hide) == [
        Mount(str(tmp / "lib.moved" / "mcpd"), "hide_dir"),
        Mount(str(tmp / "lib" / "mcpd"), "hide_dir"),
    ]


def test_a_grant_that_does_not_exist_is_an_error_naming_its_key(tmp: Path) -> None:
    (tmp / "there").mkdir()
    with pytest.raises(SandboxError) as error:
        mounts(tmp, write=(str(tmp / "there"), str(tmp / "not-there")))
    assert str(error.value) == f"servers.s.write[1]: {tmp / 'not-there'} does not exist"
    with pytest.raises(SandboxError, match=r"servers\.s\.read\[0\]"):
        mounts(tmp, read=(str(tmp / "nope"),))


def test_a_grant_through_a_symlink_is_mounted_where_it_points_and_keeps_its_link(
    tmp: Path,
) -> None:
    (tmp / "real").mkdir()
    (tmp / "plain").mkdir()
    (tmp / "link").symlink_to(tmp / "real")
    found = mounts(tmp, read=(str(tmp / "link"),), write=(str(tmp / "plain/"),))
    assert found == [
        Mount(str(tmp / "real"), "read", str(tmp / "link")),
        Mount(str(tmp / "plain"), "write", None),
    ]


def test_a_grant_with_dots_in_it_is_the_path_it_names(tmp: Path) -> None:
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    found = mounts(tmp, read=(f"{tmp}/a/../b",))
    assert found == [Mount(str(tmp / "b"), "read", None)]


def test_a_servers_home_is_made_for_it_private_and_given_as_its_real_path(
    tmp: Path,
) -> None:
    resolved = host.resolve(sandbox(tmp), "/bin/true")
    assert resolved.home == str(tmp / "homes" / "s")
    assert stat.S_IMODE(os.stat(resolved.home).st_mode) == 0o700
    assert resolved.command == "/bin/true"
    # Made again: the home that is there is kept, with what the server left in it.
    (tmp / "homes" / "s" / "kept").write_text("x")
    again = host.resolve(sandbox(tmp), "/bin/true")
    assert (Path(again.home) / "kept").read_text() == "x"


def test_a_home_that_cannot_be_made_is_an_error_naming_the_server_and_the_home(
    tmp: Path,
) -> None:
    (tmp / "homes").write_text("a file where a directory should be")
    with pytest.raises(SandboxError) as error:
        host.resolve(sandbox(tmp), "/bin/true")
    assert str(error.value).startswith(f"servers.s: cannot make its home {tmp}/homes/s: ")


def test_a_directory_to_hide_that_is_missing_is_made_private_and_hidden(tmp: Path) -> None:
    """What another program puts there once the server runs stays out of its reach; one
    whose parent is missing is left unmade."""
    pages, nowhere = tmp / "run" / "pages", tmp / "gone" / "pages"
    (tmp / "run").mkdir()
    made = (str(pages), str(nowhere))
    box = msgspec.structs.replace(sandbox(tmp), hide=made, made=made)
    found = host.resolve(box, "/bin/true")
    assert Mount(str(pages), "hide_dir") in found.mounts
    assert stat.S_IMODE(os.stat(pages).st_mode) == 0o700
    assert not (tmp / "gone").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a path away")
def test_a_name_to_hide_that_another_user_holds_hides_nothing_and_the_rest_is_hidden(
    tmp: Path,
) -> None:
    """Another user's link where the pages directory is made (to the system, or to a
    directory of the user's) and their directory at another hidden name."""
    (tmp / "run").mkdir()
    (tmp / "work").mkdir()
    (tmp / "secrets").mkdir()
    pages, tmux, x11 = tmp / "run" / "pages", tmp / "run" / "tmux-0", tmp / "run" / ".X11-unix"
    pages.symlink_to("/usr")
    tmux.symlink_to(tmp / "work")
    x11.mkdir()
    for planted in (pages, tmux, x11):
        os.lchown(planted, 4242, 4242)
    hide = (str(pages), str(tmux), str(x11), str(tmp / "secrets"))
    box = msgspec.structs.replace(sandbox(tmp), hide=hide, made=(str(pages),))
    anchors.forget_all()  # what earlier tests hid, moved
    try:
        found = host.resolve(box, "/bin/true")
        assert [m for m in found.mounts if m.kind != "fixed"] == [
            Mount(str(tmp / "secrets"), "hide_dir")
        ]
        assert os.readlink(pages) == "/usr"
        said = anchors.notices()
        assert [n.split(" ", 1)[0] for n in said] == sorted(map(str, (pages, tmux, x11)))
    finally:
        anchors.forget_all()


def test_homes_made_under_a_umask_that_lets_others_read_are_private(tmp: Path) -> None:
    old = os.umask(0o022)
    try:
        host.resolve(sandbox(tmp), "/bin/true")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp / "homes").st_mode) == 0o700


def test_homes_others_may_read_are_made_private_and_kept(tmp: Path) -> None:
    (tmp / "homes" / "s").mkdir(parents=True, mode=0o755)
    (tmp / "homes").chmod(0o755)
    (tmp / "homes" / "s" / "kept").write_text("x")
    host.resolve(sandbox(tmp), "/bin/true")
    assert stat.S_IMODE(os.stat(tmp / "homes").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp / "homes" / "s").st_mode) == 0o700
    assert (tmp / "homes" / "s" / "kept").read_text() == "x"


@pytest.mark.parametrize("linked", ["homes", "homes/s"])
def test_a_home_that_is_a_symbolic_link_is_refused(tmp: Path, linked: str) -> None:
    keys = tmp / "ssh"
    keys.mkdir(mode=0o700)
    (tmp / linked).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    (tmp / linked).symlink_to(keys)
    with pytest.raises(SandboxError) as error:
        host.resolve(sandbox(tmp), "/bin/true")
    assert str(error.value) == (
        f"servers.s: cannot make its home {tmp}/homes/s: {tmp / linked} is a symbolic "
        "link, which mcpd never makes there"
    )
    assert list(keys.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
@pytest.mark.parametrize("theirs", ["homes", "homes/s"])
def test_a_home_another_user_made_is_refused(tmp: Path, theirs: str) -> None:
    (tmp / "homes" / "s").mkdir(parents=True, mode=0o700)
    os.chown(tmp / theirs, 4242, 4242)
    with pytest.raises(SandboxError) as error:
        host.resolve(sandbox(tmp), "/bin/true")
    assert str(error.value).endswith(f"{tmp / theirs} belongs to uid 4242, not to mcpd's user")


def test_a_home_others_may_write_is_refused(tmp: Path) -> None:
    (tmp / "homes" / "s").mkdir(parents=True, mode=0o700)
    (tmp / "homes" / "s").chmod(0o777)
    with pytest.raises(SandboxError) as error:
        host.resolve(sandbox(tmp), "/bin/true")
    assert str(error.value).endswith(f"{tmp}/homes/s can be written by other users (mode 0777)")


# -- the working directory and the command --


def test_a_server_with_no_working_directory_runs_in_its_home(tmp: Path) -> None:
    plan, cwd = host.command_line(["true"], {"PATH": "/usr/bin:/bin"}, None, sandbox(tmp))
    assert cwd == str(tmp / "homes" / "s")
    assert plan.argv and plan.join is None


def test_a_command_that_cannot_be_found_fails_as_exec_would(tmp: Path) -> None:
    with pytest.raises(FileNotFoundError):
        host.command_line(["no-such-command-here"], {"PATH": str(tmp)}, None, sandbox(tmp))


@pytest.mark.timeout(10)
def test_a_strict_command_that_became_a_fifo_is_why_it_cannot_start_without_waiting(
    tmp: Path,
) -> None:
    # Found as a file, then swapped for a FIFO before its #! line is read.
    (tmp / "tool").mkdir()
    os.mkfifo(tmp / "tool" / "server")
    strict = msgspec.structs.replace(sandbox(tmp, read=(str(tmp / "tool"),)), level="strict")
    why = host.strict_problem(strict, str(tmp / "tool" / "server"), None)
    assert why == f"servers.s: {tmp}/tool/server is a FIFO, not a regular file the kernel can run"


def test_a_strict_command_through_a_link_to_a_folder_not_shown_is_why_it_cannot_start(
    tmp: Path,
) -> None:
    # The folder the link leads to lies outside /tmp, which a strict sandbox shows.
    elsewhere = Path(tempfile.mkdtemp(prefix="mcpd-test-", dir="/var/tmp"))
    try:
        (elsewhere / "tool").write_text("#!/bin/sh\n")
        (tmp / "granted").mkdir()
        (tmp / "granted" / "linked").symlink_to(elsewhere)
        command = str(tmp / "granted" / "linked" / "tool")
        strict = msgspec.structs.replace(sandbox(tmp, read=(str(tmp / "granted"),)), level="strict")
        why = host.strict_problem(strict, command, None)
    finally:
        shutil.rmtree(elsewhere)
    assert why is not None
    assert why.startswith(f"servers.s: {elsewhere}/tool is outside what a strict sandbox shows")
    assert why.endswith(f"add its folder, {elsewhere}, to servers.s.read")


# -- what the machine offers --


def bwrap_script(tmp: Path, body: str) -> str:
    path = tmp / "bwrap"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_bubblewrap_that_starts_means_namespaces_work(tmp: Path) -> None:
    assert host._try(bwrap_script(tmp, "exit 0")) is None


def test_bubblewrap_that_refuses_is_quoted_by_its_last_words(tmp: Path) -> None:
    script = bwrap_script(
        tmp,
        "echo 'warning: something' >&2; echo '' >&2;"
        " echo '  bwrap: No permissions to creating new namespace  ' >&2; exit 1",
    )
    assert host._try(script) == "bwrap: No permissions to creating new namespace"


def test_bubblewrap_that_fails_silently_is_said_to_by_its_status(tmp: Path) -> None:
    assert host._try(bwrap_script(tmp, "exit 3")) == "bwrap exited with 3"
    assert host._try(bwrap_script(tmp, "echo '   ' >&2; exit 4")) == ("no reason given")


def test_bubblewrap_that_cannot_run_at_all_is_said_so(tmp: Path) -> None:
    why = host._try(str(tmp / "no-bwrap"))
    assert why is not None and "no-bwrap" in why


CONFINED = ("in its Landlock domain",)
DENIAL = ("--disable-userns",)
SIZED = ("--size", "1048576", "--tmpfs", "/dev/shm")
KEYLESS = ("under the keyring filter",)


class Probes:
    """bubblewrap as the probe meets it: the extra arguments of each try (``CONFINED``
    for the try in a Landlock domain, ``KEYLESS`` for the one under the keyring
    filter), and what it answers to them."""

    def __init__(
        self,
        namespaces: str | None,
        network: str | None,
        confined: str | None = None,
        denial: str | None = None,
        keyless: str | None = None,
        unsized: str | None = None,
    ) -> None:
        self.tries: list[tuple[str, ...]] = []
        self.answers = {
            (): namespaces,
            ("--unshare-net",): network,
            CONFINED: confined,
            DENIAL: denial,
            KEYLESS: keyless,
            SIZED: unsized,
        }

    def __call__(
        self, bwrap: str, *extra: str, confine: Sequence[str] = (), keyless: bool = False
    ) -> str | None:
        tried = CONFINED if confine else KEYLESS if keyless else extra
        self.tries.append(tried)
        return self.answers[tried]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe of its own, on a kernel that scopes Landlock domains: the one the test
    run made is left as it was."""
    monkeypatch.setattr(host, "_machine", [])
    monkeypatch.setattr(landlock, "scoping", lambda: None)


@pytest.mark.usefixtures("fresh")
def test_the_machine_is_probed_once_and_the_network_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes = Probes(None, "no network namespace")
    monkeypatch.setattr(host, "_try", probes)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    machine = host.probe()
    assert machine.bwrap == "/usr/bin/bwrap" and machine.namespaces is None
    assert machine.network == "not probed"
    first = [(), DENIAL, SIZED, KEYLESS, CONFINED]
    assert host.probe() is machine and probes.tries == first
    assert host.probe(network=True).network == "no network namespace"
    assert host.probe(network=True).network == "no network namespace"
    assert probes.tries == [*first, ("--unshare-net",)]
    host._machine.clear()  # probe again
    host.probe()
    assert probes.tries == [*first, ("--unshare-net",), *first]


@pytest.mark.usefixtures("fresh")
def test_a_machine_without_namespaces_has_no_network_namespace_for_the_same_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes = Probes("bwrap: setting up uid map: Permission denied", None)
    monkeypatch.setattr(host, "_try", probes)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    machine = host.probe(network=True)
    assert machine.network == machine.namespaces == "bwrap: setting up uid map: Permission denied"
    assert probes.tries == [()]


@pytest.mark.usefixtures("fresh")
def test_whether_bubblewrap_can_deny_a_server_user_namespaces_is_found_with_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(host, "_try", Probes(None, None))
    assert host.probe().userns_denial is None
    host._machine.clear()  # probe again
    old = "bwrap: Unknown option --disable-userns"
    monkeypatch.setattr(host, "_try", Probes(None, None, denial=old))
    machine = host.probe()
    assert machine.namespaces is None and machine.userns_denial == old


@pytest.mark.usefixtures("fresh")
def test_whether_bubblewrap_can_size_a_tmpfs_is_found_with_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(host, "_try", Probes(None, None))
    assert host.probe().tmpfs_unsized is None
    host._machine.clear()  # probe again
    old = "bwrap: Unknown option --size"
    monkeypatch.setattr(host, "_try", Probes(None, None, unsized=old))
    machine = host.probe()
    assert machine.namespaces is None and machine.tmpfs_unsized == old
    host._machine.clear()
    # Without namespaces there is no sandbox to size anything in, for the same reason.
    monkeypatch.setattr(host, "_try", Probes("bwrap: setting up uid map", None))
    assert host.probe().tmpfs_unsized == "bwrap: setting up uid map"


@pytest.mark.usefixtures("fresh")
def test_whether_a_server_can_be_refused_the_keyrings_is_found_with_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(host, "_try", Probes(None, None))
    machine = host.probe()
    assert machine.keyring_denial is None and machine.confine
    host._machine.clear()
    setuid = "bwrap: Creating new namespace failed: Operation not permitted"
    monkeypatch.setattr(host, "_try", Probes(None, None, keyless=setuid))
    machine = host.probe()
    assert machine.namespaces is None and machine.keyring_denial == setuid
    # The thread in the Landlock domain is under the filter as well: no domain either.
    assert machine.confine == ()
    assert machine.scoping == (
        f"sandboxed servers cannot be started under a system call filter: {setuid}"
    )


def test_the_keyring_probe_runs_bubblewrap_from_the_thread_under_the_filter(tmp: Path) -> None:
    """There it has no new privileges, which a setuid bubblewrap needs."""
    needs_privileges = (
        "grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status"
        " && { echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2;"
        " exit 1; }; exit 0"
    )
    script = bwrap_script(tmp, needs_privileges)
    assert host._try(script) is None
    why = host._try(script, keyless=True)
    assert why == "bwrap: Creating new namespace failed: Operation not permitted"


@pytest.mark.usefixtures("fresh")
def test_a_bubblewrap_that_fails_in_a_landlock_domain_keeps_the_sandbox_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes = Probes(None, None, "bwrap: No permissions to create new namespace")
    monkeypatch.setattr(host, "_try", probes)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    machine = host.probe()
    assert machine.namespaces is None and machine.confine == ()
    assert machine.scoping == (
        "bubblewrap does not start in a Landlock domain: "
        "bwrap: No permissions to create new namespace"
    )


@pytest.mark.usefixtures("fresh")
def test_a_bubblewrap_that_starts_in_a_landlock_domain_is_run_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(host, "_try", Probes(None, None))
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    machine = host.probe()
    assert machine.scoping is None
    assert machine.confine == (sys.executable, "-I", "-S", landlock.__file__)


def test_the_landlock_step_runs_bubblewrap_without_new_privileges(tmp: Path) -> None:
    """A setuid bubblewrap would run as its caller: one that needs to be root says so."""
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    needs_privileges = (
        "grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status"
        " && { echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2;"
        " exit 1; }; exit 0"
    )
    script = bwrap_script(tmp, needs_privileges)
    assert host._try(script) is None
    confine = (sys.executable, "-I", "-S", landlock.__file__)
    why = host._try(script, confine=confine)
    assert why == "bwrap: Creating new namespace failed: Operation not permitted"


@pytest.mark.usefixtures("fresh")
def test_a_machine_without_bubblewrap_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    machine = host.probe(network=True)
    assert machine.bwrap is None
    assert machine.namespaces == machine.network == "bwrap not found"


def test_the_system_directories_are_found_as_directories_or_as_the_links_they_are(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp / "usr").mkdir()
    (tmp / "bin").symlink_to("usr/bin")
    (tmp / "file").write_text("x")
    dirs = tuple(str(tmp / d) for d in ("usr", "bin", "file", "missing"))
    monkeypatch.setattr(host, "SYSTEM_DIRS", dirs)
    found = [(p.path, p.link) for p in host._system()][:2]
    assert found == [(str(tmp / "usr"), None), (str(tmp / "bin"), "usr/bin")]
    assert all(p.path != str(tmp / "file") for p in host._system())
