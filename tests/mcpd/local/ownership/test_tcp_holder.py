"""Who holds the other end of a real loopback connection, read from this machine's TCP
tables in both address families (another user's, as root); and when that cannot be
told (tables that cannot be read, a connection they do not list), an error saying
why; and the processes that hold it."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from mcpd.local.ownership.tcp_holder import (
    TABLES,
    HolderUnknown,
    ServerNotRuledOut,
    first_holders,
    holding,
    on_this_machine,
    tcp_holder,
)
from tests.support.clients.tcp_client import held_by_a_child

# Connects to argv[1]:argv[2], says so, and holds the connection until stdin closes.
HOLD = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("connected", flush=True)
sys.stdin.read()
"""


async def accepted(host: str, client_uid: int | None = None) -> int | str:
    """The user tcp_holder finds for a connection to a listener on ``host``, from this
    process or (``client_uid``) from a process of that user."""
    with trio.fail_after(10):
        listener = trio.socket.socket(trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET)
        with listener:
            await listener.bind((host, 0))
            listener.listen()
            port = listener.getsockname()[1]
            if client_uid is None:
                async with await trio.open_tcp_stream(host, port):
                    conn, _ = await listener.accept()
                    with conn:
                        return _owner(conn)

            def become() -> None:
                os.setgroups([])
                os.setgid(client_uid)
                os.setuid(client_uid)

            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            proc = await trio.lowlevel.open_process(
                [python, "-c", HOLD, host, str(port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                preexec_fn=become,
            )
            try:
                assert proc.stdout is not None and proc.stdin is not None
                said = b""
                while not said.endswith(b"\n"):
                    chunk = await proc.stdout.receive_some()
                    assert chunk, "the client ended before it connected"
                    said += chunk
                conn, _ = await listener.accept()
                with conn:
                    return _owner(conn)
            finally:
                if proc.stdin is not None:
                    await proc.stdin.aclose()
                await proc.wait()


def _owner(conn: trio.socket.SocketType) -> int | str:
    """What the kernel says, checked against what the tables say."""
    try:
        kernel = tcp_holder(conn).uid
    except HolderUnknown as exc:
        kernel = str(exc)
    try:
        tables: int | str = tcp_holder(conn, ask_kernel=False).uid
    except HolderUnknown as exc:
        tables = str(exc)
    assert isinstance(kernel, int) == isinstance(tables, int) and (
        not isinstance(kernel, int) or kernel == tables
    ), (kernel, tables)
    return kernel


async def test_this_processs_connection_is_its_users() -> None:
    assert await accepted("127.0.0.1") == os.getuid()


async def test_an_ipv6_connection_is_found_in_the_other_table() -> None:
    if not Path(TABLES[1]).exists():
        pytest.skip("this machine has no IPv6")
    assert await accepted("::1") == os.getuid()


@pytest.mark.skipif(os.geteuid() != 0, reason="a process of another user is started as root")
async def test_another_users_connection_is_theirs() -> None:
    assert await accepted("127.0.0.1", 65534) == 65534


async def test_tables_that_cannot_be_read_say_so(tmp_path: Path) -> None:
    listener = trio.socket.socket()
    with trio.fail_after(10), listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        async with await trio.open_tcp_stream(*listener.getsockname()):
            conn, _ = await listener.accept()
            with conn:
                missing = (str(tmp_path / "tcp"), str(tmp_path / "tcp6"))
                with pytest.raises(HolderUnknown, match="tables cannot be read"):
                    tcp_holder(conn, missing, ask_kernel=False)
                empty = tmp_path / "empty"
                empty.write_text("  sl  local_address rem_address   st\n")
                # Its peer is this machine's loopback: a process here that is gone.
                with pytest.raises(ServerNotRuledOut, match="no process holds its other end"):
                    tcp_holder(conn, (str(empty),), ask_kernel=False)


async def test_where_the_kernel_cannot_be_asked_the_tables_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_netlink() -> object:
        raise OSError(97, "Address family not supported by protocol")

    monkeypatch.setattr("mcpd.local.ownership.tcp_holder._netlink", no_netlink)
    assert await accepted("127.0.0.1") == os.getuid()


async def test_a_connection_whose_other_end_is_closed_has_holders_unknown() -> None:
    listener = trio.socket.socket()
    with trio.fail_after(10), listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = await trio.open_tcp_stream(*listener.getsockname())
        conn, _ = await listener.accept()
        with conn:
            await client.aclose()  # its socket lingers a while, held by no process
            await conn.recv(1)  # the close has reached mcpd's end
            for ask_kernel in (True, False):
                with pytest.raises(ServerNotRuledOut, match="closed or passed on"):
                    tcp_holder(conn, ask_kernel=ask_kernel)


def test_a_peer_is_this_machines_on_its_loopback_and_its_own_addresses() -> None:
    for here in ("127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"):
        assert on_this_machine(ipaddress.ip_address(here)), here
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet: the route's own address
            own = probe.getsockname()[0]
        except OSError:
            own = "127.0.0.1"  # no route out of this machine
    assert on_this_machine(ipaddress.ip_address(own))
    # An address of no interface here (TEST-NET-1): a client elsewhere, or in another
    # network namespace, whose owner is unknown and not taken for a gone process's.
    assert not on_this_machine(ipaddress.ip_address("192.0.2.1"))


async def test_the_processes_that_hold_a_connection_are_found_by_its_inode() -> None:
    async with held_by_a_child() as (conn, child):
        held = tcp_holder(conn)
        assert held.uid == os.getuid() and held.inode > 0
        assert tcp_holder(conn, ask_kernel=False) == held  # the tables name it the same
        assert holding(held) == [child.pid]
    listener = trio.socket.socket()
    with trio.fail_after(10), listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        async with await trio.open_tcp_stream(*listener.getsockname()):
            conn, _ = await listener.accept()
            with conn:
                assert holding(tcp_holder(conn)) == [os.getpid()]


async def test_a_socket_nobody_holds_has_no_holders() -> None:
    async with held_by_a_child() as (conn, _):
        held = tcp_holder(conn)
    assert holding(held) == []


async def test_the_first_processes_and_their_trees_are_looked_in_and_the_rest_end_at_one() -> None:
    listener = trio.socket.socket()
    with trio.fail_after(10), listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        conn, _ = await listener.accept()
        with conn, client:
            # This process and a child of it both hold the client's socket.
            child = await trio.lowlevel.open_process(
                [sys.executable, "-c", "import sys; sys.stdin.read()"],
                stdin=subprocess.PIPE,
                pass_fds=[client.fileno()],
            )
            try:
                held = tcp_holder(conn)
                until = time.monotonic() + 60
                both = sorted([os.getpid(), child.pid])
                assert sorted(holding(held)) == both
                # Where the first named hold it, every holder among them and the
                # processes below them is found.
                assert sorted(first_holders(held, [os.getpid()], until)) == both
                assert first_holders(held, [child.pid], until) == [child.pid]
                # Where none of them does, one holder among the rest is enough.
                elsewhere = first_holders(held, [], until)
                assert len(elsewhere) == 1 and elsewhere[0] in both
                with pytest.raises(TimeoutError):
                    first_holders(held, [child.pid], time.monotonic() - 1)
            finally:
                assert child.stdin is not None
                await child.stdin.aclose()
                await child.wait()
        with pytest.raises(ServerNotRuledOut):
            tcp_holder(conn)
