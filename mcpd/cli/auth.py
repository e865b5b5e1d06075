"""``mcpd auth login|status|logout``: OAuth logins for the daemon's HTTP servers.

The daemon has no browser and no terminal, so the person's part of a login happens
here. ``login`` listens on a loopback port of its own for the redirect (the daemon
never opens a TCP port, and a listener that lives as long as the person waiting at
the terminal is gone when they give up); asks the daemon to start the login, which
returns the authorization URL; prints it and opens it with the desktop's opener when
there is one (``$BROWSER``, ``xdg-open``, ``open``: always an argv, never a shell);
and hands the redirect that comes back to the daemon, which checks it and exchanges
the code. Over SSH the browser cannot reach this machine's loopback port, so the
address the browser ended up at can be pasted instead. The command returns when the
server has used the new token.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from transports.base import single_exceptions

from .client import Client, Unreachable, socket_path
from .exits import EXIT_FAILED, EXIT_UNREACHABLE, ask, fail

if TYPE_CHECKING:
    from transports.oauth_http import RedirectListener

LOGIN_TIMEOUT = 600.0


def _connect(args: argparse.Namespace) -> Client:
    try:
        return Client(socket_path(args.socket))
    except Unreachable as exc:
        fail(EXIT_UNREACHABLE, str(exc))


def _entry(client: Client, alias: str) -> dict[str, Any]:
    for entry in ask(client, "mcpd/auth/status", code=False)["servers"]:
        if entry["server"] == alias:
            return entry  # type: ignore[no-any-return]
    # Let the daemon say why (unknown, stdio, or a configured Authorization header).
    ask(client, "mcpd/auth/login", {"server": alias}, code=False)
    fail(EXIT_FAILED, f"{alias} is not a server mcpd can log in to")


# -- status --


def _local(iso: str | None) -> str:
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def render_status(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return "no HTTP servers"
    lines = [f"{'SERVER':<16} {'LOGIN':<14} {'EXPIRES':<21} {'ISSUER':<32} SCOPES"]
    for s in servers:
        expires = _local(s.get("expires_at"))
        if s.get("refreshable"):
            expires += " (r)"
        scopes = " ".join(s.get("scopes") or []) or "-"
        lines.append(
            f"{s['server']:<16} {s['state']:<14} {expires:<21} {s.get('issuer') or '-':<32} "
            f"{scopes}".rstrip()
        )
        if s.get("needs_login"):
            lines.append(f"{'':<16} {s['needs_login']}")
    if any(s.get("refreshable") for s in servers):
        lines.append("(r): mcpd refreshes it before it expires")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    import json

    with _connect(args) as client:
        servers = ask(client, "mcpd/auth/status", code=False)["servers"]
    if args.json:
        print(json.dumps({"servers": servers}, indent=2))
    else:
        print(render_status(servers))
    return 0


# -- logout --


def cmd_logout(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        out = ask(client, "mcpd/auth/logout", {"server": args.server}, code=False)
    if not out.get("had_tokens"):
        print(f"{args.server}: was not logged in")
    elif out.get("problem"):
        print(f"{args.server}: logged out; revoking the tokens failed: {out['problem']}")
    elif out.get("revoked"):
        print(f"{args.server}: logged out; the server revoked the tokens")
    else:
        print(f"{args.server}: logged out (the server offers no revocation)")
    return 0


# -- login --


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
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    if u.scheme == "https":
        return True
    return u.scheme == "http" and (u.hostname or "") in ("localhost", "127.0.0.1", "::1")


async def _pasted(listener: RedirectListener, found: list[str], done: trio.Event) -> None:
    """Read pasted redirect addresses until a usable one comes (or stdin ends)."""
    prefix = listener.redirect_uri
    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            return  # no terminal (or closed): only the browser's redirect can come now
        text = line.strip()
        if not text:
            continue
        if text.startswith(prefix) or text.startswith(urlsplit(prefix).path + "?"):
            found.append(text)
            done.set()
            return
        print(f"mcpd: that is not the address to paste; it starts with {prefix}", file=sys.stderr)


async def _redirect(listener: RedirectListener, found: list[str], done: trio.Event) -> None:
    found.append(await listener.wait())
    done.set()


async def _wait_for_redirect(listener: RedirectListener, opener: list[str] | None) -> str:
    found: list[str] = []
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        if opener is not None:
            nursery.start_soon(_open, opener)
        nursery.start_soon(_redirect, listener, found, done)
        nursery.start_soon(_pasted, listener, found, done)
        await done.wait()
        nursery.cancel_scope.cancel()
    return found[0]


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
    from transports.oauth_http import redirect_listener

    try:
        return await stack.enter_async_context(redirect_listener(port=port))
    except OSError as exc:
        if fixed or not port:
            fail(EXIT_FAILED, f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    # The port of an earlier login is taken: another one does, and the daemon registers
    # the new redirect address.
    return await stack.enter_async_context(redirect_listener(port=0))


async def _call(client: Client, method: str, params: dict[str, Any]) -> Any:
    return await trio.to_thread.run_sync(lambda: ask(client, method, params, code=False))


async def _login(args: argparse.Namespace) -> int:
    alias = args.server
    async with contextlib.AsyncExitStack() as stack:
        client = stack.enter_context(_connect(args))
        entry = await trio.to_thread.run_sync(_entry, client, alias)
        if entry.get("type") == "client_credentials":
            return _report(await _call(client, "mcpd/auth/login", {"server": alias}))
        port = args.port if args.port is not None else int(entry.get("redirect_port") or 0)
        listener = await _listener(stack, port, fixed=args.port is not None)
        start = await _call(
            client, "mcpd/auth/login", {"server": alias, "redirect_uri": listener.redirect_uri}
        )
        url = start["url"]
        opener = None if args.no_browser or not safe_to_open(url) else browser_argv(url)
        print(f"To log in to {alias}, open this address in a browser:\n\n  {url}\n")
        print(
            f"Waiting for the browser to come back to {listener.redirect_uri} ...\n"
            "If the browser runs on another machine, paste the address it ends up at "
            f"(it starts with {listener.redirect_uri}) here and press Enter.",
            flush=True,
        )
        with trio.move_on_after(args.timeout):
            redirect = await _wait_for_redirect(listener, opener)
            done = {"server": alias, "login": start["login"], "redirect": redirect}
            return _report(await _call(client, "mcpd/auth/complete", done))
    print(f"mcpd: no redirect came back within {args.timeout:g} s", file=sys.stderr)
    return EXIT_FAILED


def _report(out: dict[str, Any]) -> int:
    server, state = out["server"], out["state"]
    if state in ("ready", "degraded"):
        print(f"{server}: logged in; {state} with {out.get('tools', 0)} tools")
        return 0
    print(f"{server}: logged in, but the server is {state}: {out.get('reason', '')}")
    return EXIT_FAILED


def cmd_login(args: argparse.Namespace) -> int:
    # An exit from inside the listener's nursery must leave as itself, not in a group.
    with single_exceptions():
        return trio.run(_login, args)


def add_auth_commands(sub: Any) -> None:
    a = sub.add_parser("auth", help="OAuth logins for HTTP servers")
    actions = a.add_subparsers(dest="auth_command", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sp: argparse.ArgumentParser = actions.add_parser(name, help=help)
        sp.add_argument(
            "--socket", help="daemon socket (default: $MCPD_SOCKET or the standard path)"
        )
        return sp

    lg = action("login", "log in to a server (prints the address to open)")
    lg.add_argument("server", help="the server's alias")
    lg.add_argument("--no-browser", action="store_true", help="only print the address")
    lg.add_argument("--port", type=int, help="loopback port for the redirect (default: any)")
    lg.add_argument(
        "--timeout", type=float, default=LOGIN_TIMEOUT, help="seconds to wait for the browser"
    )
    lg.set_defaults(func=cmd_login)
    st = action("status", "each HTTP server's login: state, issuer, scopes, expiry")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    lo = action("logout", "forget a server's tokens (revoking them where offered)")
    lo.add_argument("server", help="the server's alias")
    lo.set_defaults(func=cmd_logout)
