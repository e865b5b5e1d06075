"""Which group mcpd gives a socket it binds, and whom of those ``allow_uids`` and
``allow_groups`` name the socket's mode, its group or a directory above it keeps out,
for a daemon run as a user who is, or is not, in the groups allowed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from mcpd.config.checks.socket_access import access_warnings, socket_group

# Ids no user database here names: the warnings then write the numbers.
OWNER = 54321
STRANGER = 54322
# No such directory: it is made when mcpd binds, so only "/" is searched.
NOWHERE = "/nonexistent-mcpd-test/mcpd.sock"


@pytest.fixture
def daemon_user(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """mcpd run as ``OWNER`` (not root), in the groups the returned list holds."""
    groups: list[int] = []
    monkeypatch.setattr(os, "geteuid", lambda: OWNER)
    monkeypatch.setattr(os, "getegid", lambda: OWNER)
    monkeypatch.setattr(os, "getgroups", lambda: list(groups))
    return groups


def test_a_group_mcpds_user_is_in_is_given_to_the_socket(daemon_user: list[int]) -> None:
    daemon_user += [4242, 4343]
    assert socket_group(["4141", "4343", "4242"]) == 4343
    assert access_warnings("daemon", NOWHERE, 0o660, [], ["4343"]) == []


def test_a_group_mcpds_user_is_not_in_cannot_be_given_and_says_what_to_do(
    daemon_user: list[int],
) -> None:
    assert socket_group(["4242"]) is None
    warned = access_warnings("daemon", NOWHERE, 0o660, [], ["4242"])
    assert warned == [
        f"daemon: the members of 4242 cannot open the socket file, whose mode 0660 gives "
        f"them no write permission (its group is {OWNER}), which connecting takes; a file "
        f"can be given only a group its owner is in, and mcpd's user ({OWNER}) is in none "
        f"of daemon.allow_groups: add it to one (usermod -aG GROUP {OWNER}, then restart "
        'mcpd) and set socket_mode = "0660", or set socket_mode = "0666" (mcpd still lets '
        "in only its own user, root and those allow_uids and allow_groups name) (under "
        "mcpd.socket, its SocketMode= and SocketGroup= decide)"
    ]
    # Others may open the file: mcpd's own check of the peer is then all that decides.
    assert access_warnings("daemon", NOWHERE, 0o666, [], ["4242"]) == []


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o610])
def test_a_mode_that_gives_the_group_no_write_permission_says_0660(
    daemon_user: list[int], mode: int
) -> None:
    daemon_user.append(4242)
    (warned,) = access_warnings("profiles.p", NOWHERE, mode, [], ["4242"])
    assert warned.startswith(f"profiles.p: the members of 4242 cannot open the socket file, "
                             f"whose mode {mode:04o}")  # fmt: skip
    assert warned.endswith('set socket_mode = "0660" to let the group in')


def test_several_groups_share_one_socket_group_and_the_others_need_its_bits_for_others(
    daemon_user: list[int],
) -> None:
    daemon_user += [4242, 4343]
    (warned,) = access_warnings("profiles.p", NOWHERE, 0o660, [], ["4242", "4343"])
    assert "the members of 4343 cannot open the socket file" in warned
    assert "4242 cannot" not in warned
    assert 'a socket has one group, and mcpd gives it 4242; set socket_mode = "0666"' in warned
    assert access_warnings("profiles.p", NOWHERE, 0o666, [], ["4242", "4343"]) == []


def test_a_user_allowed_by_uid_is_warned_of_unless_the_mode_lets_them_in(
    daemon_user: list[int],
) -> None:
    (warned,) = access_warnings("daemon", NOWHERE, 0o600, [STRANGER, 0, OWNER], [])
    assert warned.startswith(
        f"daemon: uid {STRANGER} cannot open the socket file, whose mode 0600 gives them no "
        "write permission"
    )
    assert 'set socket_mode = "0666"' in warned
    assert access_warnings("daemon", NOWHERE, 0o666, [STRANGER], []) == []


def test_a_directory_above_the_socket_they_cannot_search_is_named() -> None:
    # Under /tmp, whose directories above are open to others, as /run/user's are.
    with tempfile.TemporaryDirectory(prefix="mcpd-access-") as top:
        os.chmod(top, 0o755)
        private = Path(top) / "run"
        private.mkdir(mode=0o700)
        path = str(private / "mcpd.sock")
        warned = access_warnings("daemon", path, 0o666, [STRANGER], [])
        assert len(warned) == 1
        assert warned[0].startswith(
            f"daemon: uid {STRANGER} cannot reach the socket {path}: the directory "
            f"{private} (mode 0700"
        )
        assert f"chmod o+x {private}" in warned[0]
        private.chmod(0o711)
        assert access_warnings("daemon", path, 0o666, [STRANGER], []) == []
