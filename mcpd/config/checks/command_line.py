"""A whole command line written in ``command``, as copied from a shell or a README.

``command`` is one program, run without a shell: ``"npx -y pkg /tmp"`` would be looked
for as a file of that name, and fail at every start with a message about files. When
no program holds the whole text and its first word is a name (to find on the PATH, be
it installed yet or not) or a program's path, the text is a command line, and the
config's error says how to split it. A program whose path has a space in it
(``/opt/My Tools/server``) is a file as written and stays one.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterator

from ..tables.model import ConfigError
from ..tables.servertable import ServerConfig


def command_line_errors(where: str, s: ServerConfig) -> Iterator[ConfigError]:
    command = s.command
    if command is None or not any(c in " \t" for c in command.strip(" \t")):
        return
    try:
        words = shlex.split(command)
    except ValueError:  # a quote left open
        words = command.split()
    if not words or _is_program(command, s):
        return
    if "/" in words[0] and not _is_program(words[0], s):
        return  # a path with a space, perhaps not there yet: its start says so
    program, args = json.dumps(words[0]), ", ".join(json.dumps(w) for w in words[1:])
    yield ConfigError(
        f"{where}.command",
        f"{json.dumps(command)} is a whole command line, and no program has that name; "
        f"give the program in command and its arguments in args: "
        f"command = {program}, args = [{args}]",
    )


def _is_program(name: str, s: ServerConfig) -> bool:
    """Whether ``name`` is a file the server could run, as far as it can be told here:
    a name on the PATH, a path (a relative one only from a ``cwd`` given)."""
    if "/" not in name:
        return shutil.which(name, path=s.env.get("PATH", os.environ.get("PATH"))) is not None
    if os.path.isabs(name):
        return os.path.isfile(name)
    return s.cwd is not None and os.path.isfile(os.path.join(s.cwd, name))
