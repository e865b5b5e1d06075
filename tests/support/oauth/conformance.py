"""The conformance suite's authorization scenarios, driven as a person would drive mcpd.

The daemon gets the scenario's server as its only upstream, with what the scenario
hands out (``MCP_CONFORMANCE_CONTEXT``: pre-registered credentials, a private key)
in its ``[servers.conf.auth]`` table, secrets through ``${file:...}`` as a user
would configure them. Then a scripted user: while the server ``needs_login``, run
``mcpd auth login conf`` (the real command, with a scripted browser as
``$BROWSER`` that follows the authorization URL's redirects back to the command's
loopback listener); once it is ready, list its tools and call them through the
socket; when a call result says a login is needed (a step-up), log in again and
repeat the call. The user gives up when a login fails or the server fails, which
is the right ending for the scenarios that test refusals.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.cli.main import main as mcpd_main
from tests.support.clients.agent import Agent, connect, make_config, running

ALIAS = "conf"
PREFIX = f"mcp__{ALIAS}__"
CIMD = "https://conformance-test.local/client-metadata.json"
BROWSER = Path(__file__).resolve().with_name("scripted_browser.py")
# More than any scenario needs (an initial login and two step-ups): a safety net
# for the test, not what stops mcpd.
MAX_LOGINS = 5


def secret_file(tmp: Path, name: str, value: str) -> str:
    path = tmp / name
    path.write_text(value)
    os.chmod(path, 0o600)
    return f"${{file:{path}}}"


def auth_table(scenario: str, context: dict[str, Any], tmp: Path) -> dict[str, Any]:
    table: dict[str, Any] = {}
    if scenario.startswith("auth/client-credentials"):
        table["type"] = "client_credentials"
    else:
        table["client_metadata_url"] = CIMD
    if "client_id" in context:
        table["client_id"] = context["client_id"]
    if "client_secret" in context:
        table["client_secret"] = secret_file(tmp, "client-secret", context["client_secret"])
    if "private_key_pem" in context:
        table["private_key"] = secret_file(tmp, "client-key.pem", context["private_key_pem"])
    if "issuer" in context:
        table["issuer"] = context["issuer"]
    return table


async def log_in(socket: str) -> tuple[int, str]:
    """``mcpd auth login conf`` as a person runs it; its exit status and output. A
    redirect that does not log in leaves the login waiting for another until its
    deadline: the scripted browser sends one at once, so a short one does."""
    out = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                mcpd_main(["auth", "login", ALIAS, "--socket", socket, "--timeout", "8"])
            except SystemExit as exc:
                return int(exc.code or 0)
        return 0

    code = await trio.to_thread.run_sync(run)
    return code, out.getvalue()


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))


def needs_login(result: dict[str, Any]) -> bool:
    outage = (result.get("_meta") or {}).get("mcpd/outage") or {}
    return bool(outage.get("state") == "needs_login")


async def server_row(agent: Agent) -> dict[str, Any]:
    row = (await agent.result("mcpd/status"))["servers"][0]
    keys = ("state", "era", "protocol_version", "last_error")
    return {k: row.get(k) for k in keys}


async def act(agent: Agent, socket: str, out: dict[str, Any]) -> None:
    logins: list[dict[str, Any]] = out["logins"]
    calls: list[dict[str, Any]] = out["calls"]
    while len(logins) < MAX_LOGINS:
        row = out["server"] = await server_row(agent)
        if row["state"] == "needs_login":
            code, said = await log_in(socket)
            last = said.strip().splitlines()[-1:]
            logins.append({"exit": code, "said": last})
            # "logged in, but the server is needs_login: ...": it asks for another one.
            if not any("logged in" in line for line in last):
                return  # the login itself failed: a person would stop here too
            continue
        if row["state"] not in ("ready", "degraded"):
            return
        tools = [t["name"][len(PREFIX) :] for t in await agent.tools()]
        out["tools"] = sorted(tools)
        this_round = []
        for tool in sorted(tools):
            result = await agent.call(PREFIX + tool, {})
            error = bool(result.get("isError"))
            this_round.append({"tool": tool, "isError": error, "text": text_of(result)})
            if needs_login(result):
                break  # a step-up: log in again (above), then call again
        calls.extend(this_round)
        if not this_round or this_round[-1]["isError"] is False:
            out["ok"] = bool(this_round) and not any(c["isError"] for c in this_round)
            return


async def drive_auth(url: str, scenario: str, tmp: Path, timeout: float) -> dict[str, Any]:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    out: dict[str, Any] = {"scenario": scenario, "logins": [], "calls": [], "ok": False}
    server = {"url": url, "auth": auth_table(scenario, context, tmp)}
    # The era probe gets the scenario's whole time: these runs test authorization, and
    # on a loaded machine a probe cut short would be taken for a legacy server.
    config = make_config(
        tmp,
        {ALIAS: server},
        state_dir=str(tmp / "state"),
        startup_deadline=timeout,
        probe_timeout=timeout,
    )
    os.environ["BROWSER"] = f"{sys.executable} {BROWSER}"
    sys.stdin = open(os.devnull)  # nobody pastes anything here  # noqa: SIM115
    async with running(config) as daemon, connect(daemon.socket_path) as agent:
        await act(agent, daemon.socket_path, out)
        out["server"] = await server_row(agent)
    return out
