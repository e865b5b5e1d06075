"""Finding a server's command as exec would, so a missing or non-executable one is
reported by name before anything is started; and bubblewrap's arguments handed over
through a descriptor, not on a command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from transports.stdio.process.child import spawn
from transports.stdio.process.launch import resolve_command


def executable(path: Path) -> Path:
    path.write_text('#!/bin/sh\necho ran "$0" "$@"\n')
    path.chmod(0o755)
    return path


def test_a_bare_name_is_found_on_the_childs_path_relative_dirs_from_its_cwd(
    tmp_path: Path,
) -> None:
    (tmp_path / "bin").mkdir()
    executable(tmp_path / "bin" / "srv")
    env = {"PATH": "/nonexistent:bin"}
    assert resolve_command("srv", env, str(tmp_path)) == str(tmp_path / "bin" / "srv")
    with pytest.raises(FileNotFoundError):
        resolve_command("srv", {"PATH": "/nonexistent"}, str(tmp_path))


def test_a_path_is_taken_from_the_childs_cwd_and_must_be_executable(tmp_path: Path) -> None:
    executable(tmp_path / "srv")
    assert resolve_command("./srv", None, str(tmp_path)) == os.path.join(tmp_path, "./srv")
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(PermissionError):
        resolve_command(str(plain), None, None)
    with pytest.raises(PermissionError):
        resolve_command("plain", {"PATH": str(tmp_path)}, None)
    with pytest.raises(FileNotFoundError):
        resolve_command("srv", None, str(tmp_path / "gone"))


def test_a_command_that_is_no_regular_file_is_refused_saying_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    os.mkfifo(tmp_path / "bin" / "srv")
    with pytest.raises(OSError, match="bin/srv is a FIFO, not a regular file") as refused:
        resolve_command("./bin/srv", None, str(tmp_path))
    assert not isinstance(refused.value, PermissionError | FileNotFoundError)
    # On PATH, as exec looks: a later one that can run is found.
    (tmp_path / "later").mkdir()
    executable(tmp_path / "later" / "srv")
    env = {"PATH": "bin:later"}
    assert resolve_command("srv", env, str(tmp_path)) == str(tmp_path / "later" / "srv")
    with pytest.raises(OSError, match="is a FIFO"):
        resolve_command("srv", {"PATH": "bin"}, str(tmp_path))
    # A folder of the name is no command at all.
    (tmp_path / "dir" / "srv").mkdir(parents=True)
    with pytest.raises(FileNotFoundError):
        resolve_command("srv", {"PATH": "dir"}, str(tmp_path))


async def test_a_spawned_child_gets_its_arguments_as_given(tmp_path: Path) -> None:
    script = executable(tmp_path / "srv")
    child = spawn(["srv", "a b", "$HOME", ""], env={"PATH": str(tmp_path)}, stdin=False)
    assert child.stdout is not None
    out = b""
    with trio.fail_after(10):
        while chunk := await child.stdout.receive_some():
            out += chunk
        assert await child.wait() == 0
    assert out.decode() == f"ran {script} a b $HOME \n"


async def test_arguments_marked_for_hand_over_are_read_from_a_descriptor(tmp_path: Path) -> None:
    """bubblewrap's own arguments (what the sandbox hides, where the homes are) go
    through ``--args FD``, off the command line every user of the machine can read;
    the rest of the command line stays as it was."""
    reader = tmp_path / "reader"
    reader.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "fd = int(sys.argv[2])\n"
        "data = b''\n"
        "while chunk := os.read(fd, 65536):\n"
        "    data += chunk\n"
        "print(json.dumps({'argv': sys.argv[1:], 'handed': data.decode()}))\n"
    )
    reader.chmod(0o755)
    long = "/hidden/" + "x" * 200_000  # more than a pipe holds
    argv = [str(reader), "--tmpfs", "/var/lib/mcpd", "--ro-bind", "/dev/null", long]
    argv += ["--", "/usr/bin/node", "server.js"]
    child = spawn(argv, stdin=False, sandbox_args=(1, 6))
    assert child.stdout is not None
    out = b""
    with trio.fail_after(10):
        while chunk := await child.stdout.receive_some():
            out += chunk
        assert await child.wait() == 0
    seen = json.loads(out)
    fd = seen["argv"][1]
    assert seen["argv"] == ["--args", fd, "--", "/usr/bin/node", "server.js"]
    assert seen["handed"] == f"--tmpfs\0/var/lib/mcpd\0--ro-bind\0/dev/null\0{long}\0"
