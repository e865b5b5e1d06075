"""Configs a reload test writes and writes again: scripted servers under a socket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.support.system.procs import scripted


def toml_server(pidfile: Path, *flags: str) -> str:
    command, args = scripted("--pid-file", str(pidfile), *flags)
    return f"command = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"


def write_config(path: Path, sock: Path, servers: dict[str, str], extra: str = "") -> None:
    text = f'[daemon]\nsocket = "{sock}"\nbackoff_base = 0.05\n{extra}\n'
    for alias, body in servers.items():
        text += f"\n[servers.{alias}]\n{body}"
    path.write_text(text)


async def wait_for(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0.02)
