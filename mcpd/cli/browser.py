"""Opening an address in the person's browser, where this desktop has one."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

from protocol.urls import openable


def browser_argv(url: str, env: dict[str, str] | None = None) -> list[str] | None:
    """The command that opens ``url`` on this desktop, or None where there is none
    (a server, an SSH session without a display)."""
    env = dict(os.environ) if env is None else env
    if env.get("BROWSER"):
        return [*shlex.split(env["BROWSER"]), url]
    if sys.platform == "darwin" and shutil.which("open"):
        return ["open", url]
    if (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")) and shutil.which("xdg-open"):
        return ["xdg-open", url]
    return None


def safe_to_open(url: str) -> bool:
    """Only https, or http to this machine: anything else is not an authorization page."""
    return openable(url)


def open_in_browser(argv: list[str]) -> str | None:
    """Start the browser and leave it running; why it could not start, if it could not."""
    try:
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return f"could not start {argv[0]}: {exc.strerror or exc}"
    return None
