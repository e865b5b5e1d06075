"""Opening an address in the person's browser, where this desktop has one.

What an opener is given sits on its command line, which every local user can read
(``/proc/PID/cmdline``), so an address that carries something only this user should
see (a login's ``state``) is not given to it: a page of this user's alone that sends
the browser on to it is (``page_to``); the page's path tells others nothing.
"""

from __future__ import annotations

import contextlib
import html
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from protocol.urls import openable

from ..host.privatefile import write_atomically


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


@contextlib.contextmanager
def page_to(url: str) -> Iterator[str]:
    """The ``file:`` address of a page that sends a browser on to ``url``, readable by
    this user alone (mode 0600, in a directory of its own in ``$XDG_RUNTIME_DIR`` or
    else the temporary directory); removed when the block ends. Raises OSError when
    it cannot be written."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = None
    if runtime and os.path.isabs(runtime):
        with contextlib.suppress(OSError):
            folder = tempfile.mkdtemp(prefix="mcpd-", dir=runtime)
    if folder is None:
        folder = tempfile.mkdtemp(prefix="mcpd-")
    try:
        page = os.path.join(folder, "open.html")
        write_atomically(page, _page(url).encode("utf-8"))
        yield Path(page).as_uri()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _page(url: str) -> str:
    to = html.escape(url, quote=True)
    return (
        '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0; url=\'{to}\'"><title>mcpd</title>'
        f'<p>On to <a href="{to}">the address mcpd opens</a>.</p>\n'
    )
