"""Opening an address in the person's browser, where this desktop has one.

What an opener is given sits on its command line, which every local user can read
(``/proc/PID/cmdline``), so an address that carries something only this user should
see (a login's ``state``, the status page's one-time code) is not given to it: a page
of this user's alone that sends the browser on to it is (``write_page``); the page's
path tells others nothing.
"""

from __future__ import annotations

import contextlib
import html
import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from protocol.urls import openable

from ..config.paths import pages_directory as where_pages_are
from ..local.privatefile import make_private_directory, write_atomically


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


def pages_directory() -> str:
    """Where the pages are (``config.paths.pages_directory``); made 0700, and refused
    (``OSError``) when another user made it first or it is a link."""
    folder = where_pages_are()
    make_private_directory(folder)
    return folder


def write_page(name: str, url: str) -> str:
    """Write the page ``name`` (mode 0600) that sends a browser on to ``url``; its
    ``file:`` address. Raises OSError when it cannot be written."""
    path = os.path.join(pages_directory(), name)
    write_atomically(path, _page(url).encode("utf-8"))
    return Path(path).as_uri()


@contextlib.contextmanager
def page_to(url: str, kind: str = "login") -> Iterator[str]:
    """``write_page`` for as long as the block lasts, named for its ``kind`` and made
    unique, so that another run's page is neither replaced nor removed."""
    name = f"{kind}-{secrets.token_hex(8)}.html"
    address = write_page(name, url)
    try:
        yield address
    finally:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(pages_directory(), name))


def _page(url: str) -> str:
    to = html.escape(url, quote=True)
    # The refresh's address ends at its first apostrophe: one in the address is sent
    # percent-encoded, as a browser sends it in a query anyway.
    refresh = html.escape(url.replace("'", "%27"), quote=True)
    return (
        '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0; url=\'{refresh}\'"><title>mcpd</title>'
        f'<p>On to <a href="{to}">the address mcpd opens</a>.</p>\n'
    )
