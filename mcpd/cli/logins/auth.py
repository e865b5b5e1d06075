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
from collections.abc import Sequence
from datetime import datetime

from protocol.shown.server_urls import ascii_hosts, ascii_url
from protocol.shown.visible import visible

from ...login_answers import AuthStatus, LoggedOut, LoginStatus
from ..client import JSON_HELP, QUICK, SOCKET_HELP, socket_path
from ..exits import EXIT_BAD_REPLY, ask, ask_as, client_for, fail
from .revocation_words import logout_said

LOGIN_TIMEOUT = 600.0  # seconds to wait for the browser


# -- status --


def _local(iso: str | None) -> str:
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except (ValueError, OverflowError):  # not a date, or none a clock here can show
        return visible(iso)


def _issuer(issuer: str | None) -> str:
    """The authorization server a login is with, its host as DNS is asked for it."""
    if not issuer:
        return "-"
    shown = ascii_url(visible(issuer))
    return shown if shown == issuer else f"{shown} (written with non-ASCII letters)"


def render_auth_status(servers: list[LoginStatus], unconfigured: Sequence[str] = ()) -> str:
    lines = _logins(servers) if servers else ["no HTTP servers"]
    for name in unconfigured:
        shown = visible(name)
        lines.append(
            f"{shown}: not configured, its saved login stays on disk; "
            f"`mcpd auth logout {shown}` revokes and removes it"
        )
    return "\n".join(lines)


def _logins(servers: list[LoginStatus]) -> list[str]:
    lines = [f"{'SERVER':<16} {'LOGIN':<14} {'EXPIRES':<21} {'ISSUER':<32} SCOPES"]
    for s in servers:
        expires = _local(s.expires_at or None)
        if s.refreshable:
            expires += " (r)"
        scopes = visible(" ".join(s.scopes or []) or "-")
        issuer = _issuer(s.issuer)
        lines.append(
            f"{visible(s.server):<16} {visible(s.state):<14} {expires:<21} {issuer:<32} "
            f"{scopes}".rstrip()
        )
        if s.needs_login:
            lines.append(f"{'':<16} {ascii_hosts(visible(s.needs_login))}")
        elif s.logged_in and not s.refreshable and s.type == "oauth":
            lines.append(f"{'':<16} {_unrenewable(s)}: a new login is needed once it expires")
    if any(s.refreshable for s in servers):
        lines.append("(r): mcpd refreshes it before it expires")
    return lines


def _unrenewable(server: LoginStatus) -> str:
    """Why a login cannot be renewed without the person."""
    if server.refresh_token:
        return "its refresh token cannot be used without the client it was issued to"
    return "no refresh token"


_NOT_READ = "could not be read (no servers)"


def cmd_auth_status(args: argparse.Namespace) -> int:
    import json

    with client_for(args, QUICK) as client:
        if args.json:  # the daemon's own words, a newer daemon's additions included
            answer = ask(client, "mcpd/auth/status", code=False)
            servers = answer.get("servers") if isinstance(answer, dict) else None
            if not isinstance(answer, dict) or not isinstance(servers, list):
                fail(EXIT_BAD_REPLY, f"the answer of mcpd to mcpd/auth/status {_NOT_READ}")
            unconfigured = answer.get("unconfigured", [])
            print(json.dumps({"servers": servers, "unconfigured": unconfigured}, indent=2))
            return 0
        status = ask_as(client, "mcpd/auth/status", AuthStatus, code=False)
    print(render_auth_status(status.servers, status.unconfigured))
    return 0


# -- logout --


def cmd_logout(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        asked = {"server": args.server, "forget_client": args.forget_client}
        out = ask_as(client, "mcpd/auth/logout", LoggedOut, asked, code=False)
    print(f"{args.server}: {logout_said(out)}")
    if out.removed:
        print(f"{args.server} is not configured: its saved login, {out.removed}, is removed")
    return 0


# -- login --


def cmd_login(args: argparse.Namespace) -> int:
    from .auth_login import login  # trio, only for the command that needs it

    return login(args)


def add_auth_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser("auth", help="OAuth logins for HTTP servers")
    actions = a.add_subparsers(dest="auth_command", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sp: argparse.ArgumentParser = actions.add_parser(name, help=help)
        sp.add_argument("--socket", type=socket_path, help=SOCKET_HELP)
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
    st.add_argument("--json", action="store_true", help=JSON_HELP)
    st.set_defaults(func=cmd_auth_status)
    lo = action("logout", "forget a server's tokens (revoking them where offered)")
    lo.add_argument("server", help="the server's alias")
    lo.add_argument(
        "--forget-client",
        action="store_true",
        help="forget the client mcpd registered with the authorization server too, so the "
        "next login registers a new one (for a server that no longer knows it)",
    )
    lo.set_defaults(func=cmd_logout)
