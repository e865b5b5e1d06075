"""``mcpd auth login``: the person's part of an OAuth login, in a browser (see
``auth``); the one ``mcpd auth`` command that needs trio.

The page handed to the browser carries the login's ``state``, with which anyone could
answer this login with a login of their own: it goes where the daemon says
(``browser``), and SIGTERM and SIGHUP end the command as Ctrl-C does, removing it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

import trio
from msgspec import UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import JsonObject
from protocol.oauth import carries_state, state_of
from protocol.shown.server_urls import ascii_hosts, ascii_url
from protocol.shown.visible import visible
from transports.errors import single_exceptions

from ...local.ownership.tcp_holder import HolderUnknown, ServerNotRuledOut, tcp_holder
from ...login_answers import AuthStatus, LoginBegun, LoginDone, LoginStatus
from ..client import BadReply, Client, DaemonUnreachable
from ..exits import EXIT_BAD_REPLY, EXIT_FAILED, EXIT_UNREACHABLE, ask, ask_as, client_for, fail
from ..status_view import local_time
from .browser import ENDING, browser_argv, page_to, safe_to_open
from .revocation_words import replaced_said

if TYPE_CHECKING:
    from transports.http.oauth_redirect import RedirectListener

T = TypeVar("T")


def server_entry(client: Client, alias: str) -> LoginStatus:
    for entry in ask_as(client, "mcpd/auth/status", AuthStatus, code=False).servers:
        if entry.server == alias:
            return entry
    # Let the daemon say why (unknown, stdio, or a configured Authorization header).
    ask(client, "mcpd/auth/login", {"server": alias}, code=False)
    fail(EXIT_FAILED, f"{alias} is not a server mcpd can log in to")


async def _pasted(
    listener: RedirectListener, state: str, found: trio.MemorySendChannel[str]
) -> None:
    """Read pasted redirect addresses, handing on each usable one (until stdin ends)."""
    prefix = listener.redirect_uri
    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            return  # no terminal (or closed): only the browser's redirect can come now
        text = line.strip()
        if not text:
            continue
        path = urlsplit(prefix).path
        if not text.startswith((prefix, path + "?", path + "/")):
            print(
                f"mcpd: that is not the address to paste; it starts with {prefix}",
                file=sys.stderr,
            )
        elif not carries_state(text, state):
            print(
                "mcpd: that address is not the answer to this login (its state differs); "
                "paste the address the browser ended up at after this login",
                file=sys.stderr,
            )
        else:
            await found.send(text)


async def _redirected(listener: RedirectListener, found: trio.MemorySendChannel[str]) -> None:
    while True:
        await found.send(await listener.next())


async def _complete(client: Client, alias: str, login_id: str, redirect: str) -> LoginDone | str:
    """The daemon's answer once the redirect logged in; why not, when it did not and
    the login waits on. Anything else ends the command."""

    def complete() -> LoginDone | str:
        params = {"server": alias, "login": login_id, "redirect": redirect}
        try:
            return client.request_as("mcpd/auth/complete", LoginDone, params)
        except rpc.RPCError as exc:
            if exc.data == {"login": "waiting"}:
                return exc.message
            fail(EXIT_FAILED, exc.message)
        except DaemonUnreachable as exc:
            fail(EXIT_UNREACHABLE, str(exc))
        except BadReply as exc:
            fail(EXIT_BAD_REPLY, str(exc))

    return await trio.to_thread.run_sync(complete)


async def _until_logged_in(
    client: Client,
    alias: str,
    login_id: str,
    listener: RedirectListener,
    state: str,
    opener: list[str] | None,
    failed: list[str],
) -> int:
    """Try each redirect that comes, from the browser or pasted, until one logs in;
    what those that did not said goes to ``failed``."""
    send, found = trio.open_memory_channel[str](0)
    async with trio.open_nursery() as nursery:
        if opener is not None:
            nursery.start_soon(_open, opener)
        nursery.start_soon(_redirected, listener, send.clone())
        nursery.start_soon(_pasted, listener, state, send)
        while True:
            out = await _complete(client, alias, login_id, await found.receive())
            if isinstance(out, LoginDone):
                nursery.cancel_scope.cancel()
                return _report(out)
            failed.append(out)
            said = ascii_hosts(visible(out))
            print(
                f"mcpd: a redirect with this login's state came back but did not log in "
                f"({said}). It may not have come from your browser, so mcpd waits "
                "on for another.",
                file=sys.stderr,
                flush=True,
            )


async def _open(argv: list[str]) -> None:
    try:
        await trio.run_process(
            argv,
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        print(f"mcpd: could not start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)


async def _listener(stack: contextlib.AsyncExitStack, port: int, fixed: bool) -> RedirectListener:
    # Here, not at the top: every command's parser is built from this module, and the
    # others (``mcpd serve`` above all) need not load the OAuth client's HTTP side.
    from transports.http.oauth_redirect import redirect_listener

    try:
        return await stack.enter_async_context(redirect_listener(port=port, admits=from_this_user))
    except OSError as exc:
        if fixed or not port:
            fail(EXIT_FAILED, f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    # The port of an earlier login is taken: another one does, and the daemon registers
    # the new redirect address.
    return await stack.enter_async_context(redirect_listener(port=0, admits=from_this_user))


async def from_this_user(sock: trio.socket.SocketType) -> bool:
    """Whether the other end of ``sock`` is held by this command's own user, as the
    browser it opens is. A connection from this machine that no process holds any more
    is not: a browser keeps its own open for the answer, and one sent and closed at once
    would pass for anyone's. True where whose it is cannot be found at all (the tables
    unreadable, a peer in another network namespace): nothing then tells the browser's
    apart, and the state still decides which redirect counts."""
    try:
        return (await trio.to_thread.run_sync(tcp_holder, sock)).uid == os.getuid()
    except ServerNotRuledOut:
        return False
    except HolderUnknown:
        return True


async def _call(client: Client, method: str, shape: type[T], params: JsonObject) -> T:
    """``method``'s answer, read as ``shape``, asked from a thread."""
    return await trio.to_thread.run_sync(lambda: ask_as(client, method, shape, params, code=False))


async def _login(args: argparse.Namespace) -> int:
    alias = args.server
    async with contextlib.AsyncExitStack() as stack:
        client = stack.enter_context(client_for(args))
        entry = await trio.to_thread.run_sync(server_entry, client, alias)
        if entry.type == "client_credentials":  # done at once: no person to wait for
            return _report(await _call(client, "mcpd/auth/login", LoginDone, {"server": alias}))
        port = args.port if args.port is not None else entry.redirect_port
        listener = await _listener(stack, port, fixed=args.port is not None)
        asked: JsonObject = {"server": alias, "redirect_uri": listener.redirect_uri}
        start = await _call(client, "mcpd/auth/login", LoginBegun, asked)
        url = start.url
        # What the authorization server sends back with the browser: only a redirect
        # with it is this login's answer.
        state = state_of(url)
        if state is None:
            fail(EXIT_FAILED, f"the authorization address carries no single state: {url}")
        listener.expect(state)
        until = datetime.now() + timedelta(seconds=args.timeout)
        shown = ascii_url(url)
        print(f"To log in to {alias}, open this address in a browser:\n\n  {visible(shown)}\n")
        if shown != url:
            print(
                "Its host was written with non-ASCII letters, some of which look like others; "
                "it is shown in the ASCII form DNS is asked for. Log in only if that is the "
                "site you mean.\n"
            )
        print(
            f"Waiting for the browser to come back to {listener.redirect_uri}, until "
            f"{until:%H:%M:%S} ...\n"
            "If the browser runs on another machine, paste the address it ends up at "
            f"(it starts with {listener.redirect_uri}) here and press Enter.\n"
            "Anyone on this machine can send an answer there, so one that does not log in "
            "does not end the wait: the login fails only if no good one comes by then.",
            flush=True,
        )
        opener = None
        if not args.no_browser and safe_to_open(url):
            opener = _opener(stack, url, start.pages)
        failed: list[str] = []
        with trio.move_on_after(args.timeout):
            return await _until_logged_in(
                client, alias, start.login, listener, state, opener, failed
            )
    if failed:
        print(f"mcpd: the login failed: {ascii_hosts(visible(failed[-1]))}", file=sys.stderr)
    else:
        print(
            f"mcpd: no redirect came back within {args.timeout:g} s (if the authorization "
            "server's page said it does not know the client, `mcpd auth logout "
            f"--forget-client {alias}` forgets the client mcpd registered there, and the "
            "next login registers a new one)",
            file=sys.stderr,
        )
    return EXIT_FAILED


def _opener(stack: contextlib.AsyncExitStack, url: str, pages: object) -> list[str] | None:
    """The command that opens ``url`` through a private page, or None (no desktop, or
    the page could not be written: then the person opens the printed address)."""
    if browser_argv(url) is None:
        return None
    try:
        page = stack.enter_context(page_to(url, pages))
    except OSError as exc:
        print(f"mcpd: not opening a browser: {exc}", file=sys.stderr)
        return None
    return browser_argv(page)


def _report(out: LoginDone) -> int:
    server, state = out.server, out.state
    if out.refreshable is False:
        expires = out.expires_at or None
        lasts = f"until {local_time(expires)}" if expires else "until the server refuses it"
        print(
            f"{server}: the authorization server issued no refresh token, so this login "
            f"lasts only as long as its access token ({lasts}); then run "
            f"`mcpd auth login {server}` again"
        )
    if state in ("ready", "degraded"):
        print(f"{server}: logged in; {state} with {out.tools} tools")
    else:
        reason = ascii_hosts(visible(out.reason or ""))
        print(f"{server}: logged in, but the server is {state}: {reason}")
    if not isinstance(out.replaced, UnsetType):
        # Whatever became of the old tokens, the login itself took.
        print(f"{server}: {replaced_said(out.replaced)}")
    return 0 if state in ("ready", "degraded") else EXIT_FAILED


async def _ended_by_signals(args: argparse.Namespace) -> int:
    """``_login``, ended by SIGTERM or SIGHUP with an exit (128 + the signal's number)
    once what it holds, its page among them, is let go. Run from a thread other than
    the main one (an embedder's), where signals cannot be received, ``_login`` alone."""
    if threading.current_thread() is not threading.main_thread():
        return await _login(args)
    with trio.open_signal_receiver(*ENDING) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_exit_on, signals)
            code = await _login(args)
            nursery.cancel_scope.cancel()
    return code


async def _exit_on(signals: AsyncIterator[int]) -> None:
    async for signum in signals:
        raise SystemExit(128 + signum)


def login(args: argparse.Namespace) -> int:
    # An exit from inside the listener's nursery must leave as itself, not in a group.
    with single_exceptions():
        return trio.run(_ended_by_signals, args)
