"""What the kernel opens to run a server's command, as found on the host for a strict
sandbox: where the links on the way lead, the interpreter a script's ``#!`` line names
and where a link there leads, and the folder to grant for each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transports.stdio.sandbox.opened import installation_of, opened_by
from transports.stdio.sandbox.strict_view import OpenedToRun


def a_virtualenv(tmp: Path) -> tuple[Path, Path]:
    """A Python installed under ``tmp/base`` (``bin`` beside ``lib``), and a virtualenv
    made from it whose ``bin/python`` is a link there, as pyenv's and uv's are."""
    base, venv = tmp / "base", tmp / "venv"
    (base / "bin").mkdir(parents=True)
    (base / "lib" / "python3.11").mkdir(parents=True)
    (base / "bin" / "python3.11").write_bytes(b"\x7fELF")
    (base / "bin" / "python3").symlink_to("python3.11")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(base / "bin" / "python3")
    (venv / "bin" / "python").symlink_to("python3")
    return base, venv


def test_a_script_of_a_virtualenv_needs_the_python_its_link_leads_to(tmp_path: Path) -> None:
    base, venv = a_virtualenv(tmp_path)
    tool = venv / "bin" / "tool"
    tool.write_text(f"#!{venv}/bin/python\nimport sys\n")
    how = f"the #! line of {tool} names {venv}/bin/python to run it"
    linked = f"{how}, a link that leads there"
    assert opened_by(str(tool), str(tmp_path)) == (
        OpenedToRun(f"{venv}/bin/python", how, str(venv / "bin")),
        OpenedToRun(f"{venv}/bin/python3", linked, str(venv / "bin")),
        OpenedToRun(f"{base}/bin/python3", linked, str(base), installed=True),
        OpenedToRun(f"{base}/bin/python3.11", linked, str(base), installed=True),
    )


def test_a_command_that_is_a_link_needs_where_it_leads(tmp_path: Path) -> None:
    base, venv = a_virtualenv(tmp_path)
    python = venv / "bin" / "python"
    how = f"its command {python} is a link that leads there"
    assert [o.path for o in opened_by(str(python), "/")] == [
        f"{venv}/bin/python3",
        f"{base}/bin/python3",
        f"{base}/bin/python3.11",
    ]
    assert {o.how for o in opened_by(str(python), "/")} == {how}


def test_a_program_that_is_no_script_nor_link_needs_nothing_else(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "tool"
    program.parent.mkdir()
    program.write_bytes(b"\x7fELF#!/elsewhere/python\n")
    assert opened_by(str(program), "/") == ()


def test_an_interpreter_that_is_not_there_is_left_to_the_exec_to_name(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#! /nowhere/bin/python -u\n")
    assert opened_by(str(script), "/") == ()
    # Written with a space after #! and an argument: the interpreter is its first word.
    script.write_text(f"#! {tmp_path}/python -u\n")
    (tmp_path / "python").write_bytes(b"")
    assert [o.path for o in opened_by(str(script), "/")] == [f"{tmp_path}/python"]


def test_the_folder_to_grant_for_a_virtualenvs_script_is_the_virtualenv(tmp_path: Path) -> None:
    base, venv = a_virtualenv(tmp_path)
    (venv / "lib").mkdir()
    assert installation_of(str(venv / "bin" / "tool")) == str(venv)
    assert installation_of(str(base / "bin" / "python3.11")) == str(base)
    # A bin with no lib beside it is no installation: ~/bin is not to give the home away.
    (tmp_path / "home" / "bin").mkdir(parents=True)
    assert installation_of(str(tmp_path / "home" / "bin" / "tool")) is None
    assert installation_of("/bin/sh") is None


def test_an_interpreter_named_through_a_link_to_a_folder_needs_both_spellings(
    tmp_path: Path,
) -> None:
    # The sandbox shows no link of the user's that it is not granted by: the kernel,
    # given the name through the link, finds nothing there.
    base, venv = a_virtualenv(tmp_path)
    (tmp_path / "project").symlink_to(venv)
    tool = venv / "bin" / "tool"
    tool.write_text(f"#!{tmp_path}/project/bin/python\n")
    paths = [o.path for o in opened_by(str(tool), "/")]
    assert paths[:2] == [f"{tmp_path}/project/bin/python", f"{venv}/bin/python"]
    assert paths[-1] == f"{base}/bin/python3.11"


@pytest.mark.timeout(10)
def test_a_command_that_became_a_fifo_is_refused_without_waiting_on_it(tmp_path: Path) -> None:
    # Put there after the command was found: opened for its #! line, it would block
    # the thread that checks it until someone wrote to it.
    fifo = tmp_path / "server"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=f"{fifo} is a FIFO, not a regular file the kernel"):
        opened_by(str(fifo), str(tmp_path))


def test_a_command_that_is_a_device_is_refused_naming_what_it_is() -> None:
    with pytest.raises(OSError, match="/dev/null is a character device, not a regular file"):
        opened_by("/dev/null", "/")


def test_a_command_through_a_link_to_a_folder_needs_where_it_lies(tmp_path: Path) -> None:
    # A granted folder holding a link to another: the sandbox shows the link, and the
    # kernel, given the command's name through it, finds nothing where it leads.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "tool").write_bytes(b"\x7fELF")
    (tmp_path / "granted").mkdir()
    (tmp_path / "granted" / "linked").symlink_to(tmp_path / "elsewhere")
    command = f"{tmp_path}/granted/linked/tool"
    how = f"its command {command} lies there, through a link to a folder on the way"
    assert opened_by(command, "/") == (
        OpenedToRun(f"{tmp_path}/elsewhere/tool", how, f"{tmp_path}/elsewhere"),
    )


def test_a_hash_bang_line_too_long_for_the_kernel_says_so(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!" + "/" * 100_000 + "usr/bin/python3\n")
    with pytest.raises(OSError, match=f"the #! line of {script} is too long for the kernel"):
        opened_by(str(script), "/")
    # Arguments cut short are the kernel's to take as they are: the name ended.
    (tmp_path / "python").write_bytes(b"")
    script.write_text(f"#!{tmp_path}/python " + "-x" * 200 + "\n")
    assert [o.path for o in opened_by(str(script), "/")] == [f"{tmp_path}/python"]


def test_a_hash_bang_line_ends_its_interpreters_name_where_the_kernel_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "python").write_bytes(b"")
    script = tmp_path / "tool"
    # A vertical tab is part of the name, which names no file: the exec says so.
    script.write_text(f"#!{tmp_path}/python\v\n")
    assert opened_by(str(script), "/") == ()
    script.write_text(f"#! \t{tmp_path}/python\t-u")
    assert [o.path for o in opened_by(str(script), "/")] == [f"{tmp_path}/python"]
