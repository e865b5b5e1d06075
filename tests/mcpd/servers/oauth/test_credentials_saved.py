"""A saved login is used only while the configuration still fits it: a client id,
issuer or scopes the configuration no longer names, or a file that cannot be read,
leave the server asking for a login that says why, at a start and at a reload, and
nothing of the old login (its client id with the new secret) reaches any server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.tables.model import Config
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from tests.support.oauth.protected_mcp import ProtectedMcp, login, serve_protected

LIMIT = 20
ONE, TWO = "SECRET-ONE-0123456789abcdef", "SECRET-TWO-0123456789abcdef"


def secret_file(tmp: Path, value: str) -> str:
    path = tmp / f"secret-{value[:10]}"
    path.write_text(value)
    path.chmod(0o600)
    return f"${{file:{path}}}"


def config_for(tmp: Path, srv: ProtectedMcp, **auth: Any) -> Config:
    server = {"url": srv.mcp_url, "auth": auth} if auth else {"url": srv.mcp_url}
    return make_config(tmp, {"t": server}, state_dir=str(tmp / "state"), startup_deadline=5.0)


def preregistered(tmp: Path, srv: ProtectedMcp, client_id: str, secret: str, issuer: str) -> Config:
    return config_for(
        tmp,
        srv,
        client_id=client_id,
        client_secret=secret_file(tmp, secret),
        issuer=issuer,
        token_endpoint_auth_method="client_secret_post",
    )


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def logged_in_as_pre1(tmp: Path, srv: ProtectedMcp) -> None:
    srv.auth_method, srv.client_id, srv.client_secret = "client_secret_post", "pre1", ONE
    config = preregistered(tmp, srv, "pre1", ONE, srv.base)
    async with running(config) as daemon, connect(daemon.socket_path) as agent:
        await login(agent, srv)


def moved_reason(srv: ProtectedMcp) -> str:
    return (
        f'the saved login is for client "pre1" at the issuer "{srv.base}"; the configuration '
        'now names client "pre2" at the issuer "http://127.0.0.1:9"'
    )


async def test_a_saved_login_for_another_client_and_issuer_is_not_used_after_a_restart(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            await logged_in_as_pre1(tmp_path, srv)
            srv.revoke_access()  # a restored login would refresh at once
            moved = preregistered(tmp_path, srv, "pre2", TWO, "http://127.0.0.1:9")
            async with running(moved) as daemon, connect(daemon.socket_path) as agent:
                row = await server_row(agent)
                auth = (await agent.result("mcpd/auth/status"))["servers"][0]
    assert row["state"] == "needs_login"
    want = f"{moved_reason(srv)}, so it is not used; run `mcpd auth login t`"
    assert row["last_error"] == want
    assert auth["needs_login"] == want
    assert all(form.get("client_secret") != TWO for form in srv.token_forms)
    assert srv.grants["refresh_token"] == 0


async def test_a_reload_that_names_another_client_and_issuer_sets_the_saved_login_aside(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            srv.auth_method, srv.client_id, srv.client_secret = "client_secret_post", "pre1", ONE
            config = preregistered(tmp_path, srv, "pre1", ONE, srv.base)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                srv.revoke_access()
                moved = preregistered(tmp_path, srv, "pre2", TWO, "http://127.0.0.1:9")
                await daemon.supervisor.reload(moved)
                with trio.fail_after(5):
                    while (row := await server_row(agent))["state"] != "needs_login":
                        await daemon.supervisor.servers["t"].phase_changed()
    assert row["last_error"] == f"{moved_reason(srv)}, so it is not used; run `mcpd auth login t`"
    assert all(form.get("client_secret") != TWO for form in srv.token_forms)


async def test_a_saved_login_for_scopes_the_configuration_no_longer_names_is_not_used(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            wide = config_for(tmp_path, srv, scopes=["read", "write"])
            async with running(wide) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            narrow = config_for(tmp_path, srv, scopes=["read"])
            async with running(narrow) as daemon, connect(daemon.socket_path) as agent:
                row = await server_row(agent)
            async with running(wide) as daemon, connect(daemon.socket_path) as agent:
                again = await server_row(agent)
    assert row["state"] == "needs_login"
    assert row["last_error"] == (
        'the saved login was made for the scopes "read write"; the configuration now '
        'names "read", so it is not used; run `mcpd auth login t`'
    )
    assert again["state"] == "ready"  # the file is kept until a new login replaces it


@pytest.mark.parametrize("damage", [b"{not json", b""])
async def test_a_damaged_saved_login_is_named_in_the_status(tmp_path: Path, damage: bytes) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            path = tmp_path / "state" / "oauth" / "t.json"
            path.write_bytes(damage)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                row = await server_row(agent)
    assert row["state"] == "needs_login"
    assert row["last_error"].startswith(f"the saved login in {path} cannot be read (")
    assert row["last_error"].endswith("), so it is not used; run `mcpd auth login t`")


async def test_logging_out_of_a_server_no_longer_configured_revokes_and_removes_its_login(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                path = tmp_path / "state" / "oauth" / "t.json"
                await daemon.supervisor.reload(
                    make_config(tmp_path, {}, state_dir=str(tmp_path / "state"))
                )
                refused = await agent.rpc("mcpd/auth/logout", {"server": "../oauth/t"})
                out = await agent.result("mcpd/auth/logout", {"server": "t"})
                again = await agent.rpc("mcpd/auth/logout", {"server": "t"})
    assert out == {
        "resultType": "complete",
        "server": "t",
        "had_tokens": True,
        "revoked": ["refresh_token", "access_token"],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
        "removed": str(path),
    }
    assert not path.exists() and len(srv.revoked) == 2 and not srv.live_refresh
    assert "no server named '../oauth/t'" in refused["error"]["message"]
    assert "no server named 't'" in again["error"]["message"]


class RevokesAccess(ProtectedMcp):
    """Revoking a refresh token revokes the access tokens with it, and a call with a
    live token waits at the server until a revocation has come."""

    def __init__(self) -> None:
        super().__init__()
        self.revocation = trio.Event()

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        token = (req.header("authorization") or "").removeprefix("Bearer ")
        if req.target == "/revoke":
            self.issued.clear()
            self.revocation.set()
        elif req.target == "/mcp" and req.rpc_method == "tools/call" and token in self.issued:
            await self.revocation.wait()
        await super().__call__(req, respond)


async def test_a_call_that_meets_a_logout_says_it_was_logged_out(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        srv = RevokesAccess()
        async with serve_http(srv) as http:
            srv._http = http
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                srv.revoke_access()
                srv.answer_gate = trio.Event()
                texts: list[str] = []

                async def call() -> None:
                    texts.append((await agent.call("mcp__t__whoami"))["content"][0]["text"])

                async with trio.open_nursery() as tasks:
                    tasks.start_soon(call)
                    await srv.issued_held.wait()  # the call's refresh is answered next
                    tasks.start_soon(agent.result, "mcpd/auth/logout", {"server": "t"})
                    srv.answer_gate.set()
    assert texts[0].startswith(
        "The tool server 't' is unavailable (needs_login): logged out; run `mcpd auth login t`."
    )
