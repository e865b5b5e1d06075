"""The endpoint on ``localhost``: both loopback addresses held, so that no other local
user can listen on the one a browser or host goes to for the name; a squatter on
``[::1]`` stops the start naming it; and the names the endpoint answers to and hands
out are those of the addresses it holds."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.http.tcp import own_names
from mcpd.starting.cannot_start import DaemonError
from mcpd.starting.listening import bind_endpoint
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import Reply, auth
from tests.support.system.procs import scripted


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6_loopback = pytest.mark.skipif(
    not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (no ::1 on lo)"
)


def config(tmp_path: Path, listen: str) -> Any:
    command, args = scripted("--tools", "1")
    return make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen=listen,
        state_dir=str(tmp_path / "state"),
    )


async def ask(address: str, port: int, target: str, headers: dict[str, str]) -> Reply:
    """One GET to ``address`` on its own connection; the whole answer."""
    stream = await trio.open_tcp_stream(address, port)
    lines = [
        f"GET {target} HTTP/1.1",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    await stream.aclose()
    return Reply(data)


def taken(address: str, port: int) -> bool:
    """Whether another program could not listen at ``address`` on ``port`` now."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            other.bind((address, port))
            other.listen()
        except OSError as exc:
            assert exc.errno == errno.EADDRINUSE
            return True
    return False


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """Another program listening on ``[::1]`` at a port free on 127.0.0.1."""
    while True:
        sock = socket.socket(socket.AF_INET6)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(("::1", 0))
        sock.listen()
        if not taken("127.0.0.1", sock.getsockname()[1]):
            break
        sock.close()
    yield sock
    sock.close()


# -- the names of what is held --


def test_the_names_are_the_addresses_held_and_localhost_only_with_both() -> None:
    alone = bind_endpoint("127.0.0.1:0")
    anywhere = bind_endpoint("0.0.0.0:0")
    try:
        assert own_names("127.0.0.1", alone) == {"127.0.0.1"}
        assert own_names("0.0.0.0", anywhere) == {"0.0.0.0", "127.0.0.1"}
    finally:
        for sock in alone + anywhere:
            sock.close()


@needs_ipv6_loopback
def test_localhost_names_both_loopback_addresses_and_itself() -> None:
    both = bind_endpoint("localhost:0")
    try:
        assert own_names("localhost", both) == {"127.0.0.1", "[::1]", "localhost"}
        # The same sockets under a literal address's name: both held all the same.
        assert "localhost" in own_names("127.0.0.1", both)
        assert own_names("::1", both[1:]) == {"[::1]"}
    finally:
        for sock in both:
            sock.close()


# -- the daemon --


@needs_ipv6_loopback
async def test_localhost_is_served_on_both_loopback_addresses_on_one_port(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path, "localhost:0")) as daemon:
            endpoint = daemon.agent_server.endpoint
            assert endpoint is not None
            port, token = endpoint.port, daemon.http_token()
            # What mcpd hands out (the dashboard's address, connect --http's URL, the
            # status) names an address it holds, not the name.
            assert endpoint.host == "127.0.0.1"
            assert endpoint.url == f"http://127.0.0.1:{port}/mcp"
            for address in ("127.0.0.1", "::1"):
                assert taken(address, port), address
                ok = await ask(address, port, "/healthz", {"Host": "x", **auth(token)})
                assert ok.status == 200 and ok.json()["status"] == "ok"
            for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}"):
                page = await ask("::1", port, "/", {"Host": host})
                assert b"is not this endpoint" not in page.body, host


@needs_ipv6_loopback
async def test_a_listener_on_ipv6_loopback_stops_the_start_naming_it(
    tmp_path: Path, squatter: socket.socket
) -> None:
    port = squatter.getsockname()[1]
    with trio.fail_after(60), pytest.raises(DaemonError) as refused:
        async with running(config(tmp_path, f"localhost:{port}")):
            pytest.fail("mcpd started beside a listener on [::1]")
    said = str(refused.value)
    assert said.startswith(
        f"daemon.http_listen: cannot listen on localhost:{port} at [::1]:{port}: "
    ), said
    assert "in use" in said and "listens on it" in said
    assert not taken("127.0.0.1", port)  # what was bound before is let go


async def test_a_loopback_address_not_held_is_a_foreign_host_and_origin(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path, "127.0.0.1:0")) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for host in (f"[::1]:{port}", f"localhost:{port}"):
                page = await ask("127.0.0.1", port, "/", {"Host": host})
                assert page.status == 403 and b"is not this endpoint" in page.body, host
                origin = {"Host": f"127.0.0.1:{port}", **auth(token, Origin=f"http://{host}")}
                refused = await ask("127.0.0.1", port, "/healthz", origin)
                assert refused.status == 403 and b"Origin" in refused.body, host
            own = await ask("127.0.0.1", port, "/", {"Host": f"127.0.0.1:{port}"})
            assert b"is not this endpoint" not in own.body
