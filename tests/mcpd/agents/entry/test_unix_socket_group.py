"""Who the socket mcpd binds lets in, as the config says: with ``allow_groups`` and
``socket_mode = "0660"`` the socket's group is the allowed group, so its members
connect and others still cannot open the file; and whom the mode, the group or a
directory above the socket keeps out of those allowed is warned of, at start as by
``check-config``, naming who, the path and its mode."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.daemons.served import Served
from tests.support.system.peer_user import ONE_REQUEST, needs_root, peer_uid, shared_dir

pytestmark = needs_root

GROUP = "mcpd-test-agents"
MEMBER = "mcpd-test-member"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def member() -> pwd.struct_passwd:
    """A user in the group ``GROUP`` (both made the first time)."""
    if subprocess.run(["getent", "group", GROUP], capture_output=True).returncode != 0:
        subprocess.run(["groupadd", "--system", GROUP], check=True)
    if subprocess.run(["id", MEMBER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "-G", GROUP, MEMBER], check=True)
    return pwd.getpwnam(MEMBER)


def request_as(user: pwd.struct_passwd, socket: Path) -> str:
    """What ``user``, with the groups the user database gives it, gets for a ping."""
    groups = os.getgrouplist(user.pw_name, user.pw_gid)
    out = subprocess.run(
        [PYTHON, "-c", ONE_REQUEST, str(socket), "ping"],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=lambda: (os.setgroups(groups), os.setgid(user.pw_gid), os.setuid(user.pw_uid)),
    )
    return out.stdout + out.stderr


@pytest.fixture
def place() -> Iterator[Path]:
    directory = shared_dir()
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def config(place: Path, daemon: str, profile: str = "") -> str:
    return (
        f'[daemon]\nsocket = "{place}/mcpd.sock"\nstate_dir = "{place}/state"\n'
        f"startup_deadline = 1.0\n{daemon}\n{profile}\n[servers.notes]\n"
        f'command = "{sys.executable}"\nargs = ["-m", "mcpd.demo.notes"]\n'
    )


def test_a_member_of_the_allowed_group_connects_and_a_non_member_cannot(place: Path) -> None:
    allowed = member()
    other = pwd.getpwuid(peer_uid())
    served = Served(place, config(place, f'socket_mode = "0660"\nallow_groups = ["{GROUP}"]'))
    try:
        served.until("listening on")
        assert '"result"' in request_as(allowed, served.socket)
        st = served.socket.stat()
        assert (st.st_gid, oct(st.st_mode & 0o777)) == (grp.getgrnam(GROUP).gr_gid, "0o660")
        refused = request_as(other, served.socket)
        assert "PermissionError" in refused and '"result"' not in refused
        served.proc.send_signal(signal.SIGTERM)
        served.exited()
    finally:
        served.close()
    assert not any("cannot open the socket file" in line for line in served.log), served.log


def test_those_allowed_whom_the_mode_or_a_directory_keeps_out_are_warned_of(
    place: Path,
) -> None:
    member()
    uid = peer_uid()
    private = place / "private"
    private.mkdir(mode=0o700)
    text = config(
        place,
        f'socket_mode = "0660"\nallow_groups = ["{GROUP}"]\nallow_uids = [{uid}]',
        f'[profiles.p]\nsocket = "{private}/p.sock"\nsocket_mode = "0666"\n'
        f'allow_groups = ["{GROUP}"]\n',
    )
    uid_said = (
        f"daemon: uid {uid} (mcpd-test-peer) cannot open the socket file, whose mode 0660 "
        f"gives them no write permission (its group is {GROUP}), which connecting takes; "
        'set socket_mode = "0666"'
    )
    dir_said = (
        f"profiles.p: the members of {GROUP} cannot reach the socket {private}/p.sock: the "
        f"directory {private} (mode 0700, owner root, group root) does not let them search it"
    )
    (place / "c.toml").write_text(text)
    checked = subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(place / "c.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert checked.returncode == 0, checked.stderr
    warned = [line for line in checked.stderr.splitlines() if "socket" in line]
    assert len(warned) == 2, checked.stderr
    assert warned[0].startswith(f"warning: {uid_said}")
    assert warned[1].startswith(f"warning: {dir_said}")
    served = Served(place, text)
    try:
        served.until(dir_said)
        served.proc.send_signal(signal.SIGTERM)
        served.exited()
    finally:
        served.close()
    assert any(uid_said in line for line in served.log), served.log
