"""``mcpd dashboard``: an address that logs one browser in to mcpd's status page.

The page is served on the HTTP endpoint (``[daemon] http_listen``). A browser cannot
send the endpoint's token, so the daemon hands its own user (or root) an address with
a one-time code instead, which the page trades for a session cookie. Without the
endpoint, this says how to turn it on, and where the page can be read meanwhile.

A browser is given a ``file:`` page that carries the code (``browser``), and the
opener may return before the browser has read it. So the command waits, until the
daemon says the code can open no session (traded, or past its time), and then removes
the page: the code does not outlive its use on disk, nor the command when it is
ended by SIGTERM or SIGHUP. The page goes where the daemon says (``browser``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from urllib.parse import parse_qs, urlsplit

from msgspec import UNSET

from protocol.shown.visible import visible

from ...config.tables.model import default_config_path
from ...login_answers import PageAddress
from ...status_document import StatusDocument
from ..client import QUICK
from ..exits import EXIT_BAD_REPLY, EXIT_FAILED, ask, ask_as, client_for, fail
from .browser import browser_argv, ended_by_signals, open_in_browser, page_to


def cmd_dashboard(args: argparse.Namespace) -> int:
    with client_for(args, QUICK) as client:
        out = ask_as(client, "mcpd/auth/dashboard", PageAddress, code=False)
        if out.url is None:
            daemon = ask_as(client, "mcpd/status", StatusDocument).daemon
    url = out.url
    # An address is printed and opened as it is: only one that is plainly text.
    if url is not None and not url.isprintable():
        fail(EXIT_BAD_REPLY, f"the daemon sent no usable address: {visible(repr(url))}")
    if url is None:
        socket = daemon.socket or "SOCKET"
        listen = '\n\n  [daemon]\n  http_listen = "127.0.0.1:8765"\n\n'
        if daemon.config is None:
            # No file of its own to edit: the default config is not what it reads.
            how = (
                "The mcpd answering here was started without a config file (as `mcpd serve "
                "--demo` is), so no file turns it on: start mcpd with --config FILE, where "
                f"FILE has its servers and{listen}"
            )
        else:
            config = daemon.config or default_config_path()
            how = (
                f"To turn it on, set{listen}in {visible(config)} and restart mcpd (a reload "
                "does not open it). "
            )
        print(
            f"mcpd: the status page is served on the HTTP endpoint, which is off. {how}"
            "Until then the page can be read with\n\n"
            f"  curl --unix-socket {visible(socket)} http://mcpd/\n",
            file=sys.stderr,
        )
        return EXIT_FAILED
    # An older daemon's address does not say how long it works: a code's time then.
    seconds = out.expires_in or 60.0
    print(
        f"Open mcpd's status page in a browser:\n\n  {url}\n\n"
        f"The address works once, within {seconds:.0f} seconds; run mcpd dashboard again "
        "for another browser."
    )
    if args.no_browser or browser_argv(url) is None:
        return 0
    with ended_by_signals(), contextlib.ExitStack() as page:
        try:
            # The code stays off the opener's command line, where any local user could
            # read it and redeem it first.
            written = page.enter_context(
                page_to(url, None if out.pages is UNSET else out.pages, "dashboard")
            )
            opener = browser_argv(written)
        except OSError as exc:
            print(f"mcpd: not opening a browser: {exc}", file=sys.stderr)
            return 0
        problem = open_in_browser(opener) if opener is not None else None
        if problem is not None:
            print(f"mcpd: {problem}", file=sys.stderr)
            return 0
        print(
            f"mcpd: waiting for the browser to open it (at most {seconds:.0f} seconds)",
            file=sys.stderr,
        )
        code = parse_qs(urlsplit(url).query).get("code", [""])[0]
        with client_for(args) as client:
            ask(client, "mcpd/auth/dashboard_spent", {"code": code}, code=False)
    return 0
