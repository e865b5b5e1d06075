"""Opening an address in the person's browser, where this desktop has one.

What an opener is given sits on its command line, which every local user can read
(``/proc/PID/cmdline``), so an address that carries something only this user should
see (a login's ``state``, the status page's one-time code) is not given to it: a page
of this user's alone that sends the browser on to it is (``write_page``); the page's
path tells others nothing.

The page goes only where the daemon says (``pages``, in its answer): the directory it
hides from the servers it sandboxes, which the command could not find from its own
environment. None named (an older daemon), or one that is not a private directory of
this user's, and no page is written: the person opens the printed address instead.

SIGTERM and SIGHUP end a command that wrote a page as Ctrl-C does (``ended_by_signals``),
so the page goes with it.
"""

from __future__ import annotations

import contextlib
import html
import os
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from protocol.shown.server_urls import openable

from ...local.ownership.owners import user_name
from ...local.state.privatefile import UnsafeFileError, open_directory, write_atomically

ENDING: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


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


def pages_directory_of(named: object) -> str:
    """``named``, the directory the daemon says pages go in, once it is found to be a
    real directory of this user's that no one else may enter; else UnsafeFileError,
    saying why."""
    if not isinstance(named, str) or not os.path.isabs(named):
        raise UnsafeFileError(
            "the daemon names no directory for the page, one it hides from its servers "
            "(it is older than this command: restart it)"
        )
    try:
        link = os.lstat(named)
    except OSError:
        pass  # open_directory says why
    else:
        # Another user may take the name in /tmp before the daemon makes it there.
        if stat.S_ISLNK(link.st_mode) and link.st_uid != os.geteuid():
            raise UnsafeFileError(
                f"{named} is a symbolic link of {_another_user(link.st_uid)}, not a "
                "directory of this user's: a page goes only into one"
            )
    fd = open_directory(named, check=False)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_uid != os.geteuid():
        raise UnsafeFileError(
            f"{named} belongs to {_another_user(st.st_uid)}, who could read the page"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise UnsafeFileError(f"{named} is open to other users (mode {mode:04o})")
    return named


def _another_user(uid: int) -> str:
    return f"another user (uid {uid}, {user_name(uid)})"


def write_page(name: str, url: str, pages: object) -> str:
    """Write the page ``name`` (mode 0600) that sends a browser on to ``url``, in the
    directory ``pages`` (see ``pages_directory_of``); its ``file:`` address. Raises
    OSError when it cannot be written."""
    path = os.path.join(pages_directory_of(pages), name)
    write_atomically(path, _page(url).encode("utf-8"))
    return Path(path).as_uri()


@contextlib.contextmanager
def page_to(url: str, pages: object, kind: str = "login") -> Iterator[str]:
    """``write_page`` for as long as the block lasts, named for its ``kind`` and made
    unique, so that another run's page is neither replaced nor removed."""
    name = f"{kind}-{secrets.token_hex(8)}.html"
    try:
        yield write_page(name, url, pages)
    finally:
        # Also when the page was being written as the command was ended.
        if isinstance(pages, str):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(pages, name))


@contextlib.contextmanager
def ended_by_signals() -> Iterator[None]:
    """For as long as the block lasts, SIGTERM and SIGHUP end the command by an exit
    (128 + the signal's number) raised where it is, which removes its page on the way
    out; a command that is killed outright leaves it. Run from a thread other than the
    main one (an embedder's), where no handler can be set, it does nothing."""

    def end(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = [signal.signal(s, end) for s in ENDING]
    try:
        yield
    finally:
        for s, handler in zip(ENDING, before, strict=True):
            signal.signal(s, handler)


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
