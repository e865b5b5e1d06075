"""`mcpd serve` binds every socket agents reach it on before it starts any server: a
server that tries to take the HTTP endpoint's port or a socket's path as it starts finds
them mcpd's, and a place mcpd cannot take stops it before any server has run (were it
otherwise, the server listening there would be sent what agents send mcpd, the
endpoint's bearer token first)."""

from __future__ import annotations

import http.client
import json
import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.conftest import ROOT
from tests.support.daemons.notify import Notifications
from tests.support.servers.counting_starts import counted_server, starts
from tests.support.system.peer_user import USER, needs_root, peer_uid, start_as
from tests.support.system.procs import SCRIPTED

pytestmark = pytest.mark.timeout(90)

SQUATTER = str(Path(SCRIPTED).parents[1] / "breakout" / "squatter.py")


@pytest.fixture
def port() -> Iterator[int]:
    """A loopback port nobody listens on (the kernel's pick, let go again)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    number: int = probe.getsockname()[1]
    probe.close()
    yield number


def write_config(tmp_path: Path, port: int, servers: str, listen: str = "127.0.0.1:{}") -> Path:
    cfg = tmp_path / "mcpd.toml"
    cfg.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'http_listen = "{listen.format(port)}"\nhttp_allow_remote = true\n'
        f'[profiles.work]\nsocket = "{tmp_path / "work.sock"}"\n' + servers
    )
    return cfg


def serve(cfg: Path, notify: Notifications | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if notify is not None:
        env["NOTIFY_SOCKET"] = notify.path
    return subprocess.Popen(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(cfg), "--log", "stderr"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def unix_status(path: Path, target: str) -> int:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n".encode())
        head = sock.recv(64).decode()
    return int(head.split()[1])


def test_a_server_started_early_finds_every_place_of_mcpd_taken(tmp_path: Path, port: int) -> None:
    notes = tmp_path / "squatter.notes"
    targets = [
        f"tcp:127.0.0.1:{port}",
        f"tcp:0.0.0.0:{port}",
        f"unix:{tmp_path / 'mcpd.sock'}",
        f"unix:{tmp_path / 'work.sock'}",
    ]
    args = [SQUATTER, str(notes), *targets, "--", "--tools", "2"]
    cfg = write_config(
        tmp_path,
        port,
        f'[servers.squat]\ncommand = "{sys.executable}"\nargs = {json.dumps(args)}\n',
    )
    notify = Notifications(tmp_path / "notify")
    proc = serve(cfg, notify)
    try:
        notify.next_with("READY=1", timeout=60)
        assert notes.read_text().splitlines() == [f"{t} refused EADDRINUSE" for t in targets]
        token = (tmp_path / "state" / "token").read_text().strip()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("GET", "/healthz", headers={"Authorization": f"Bearer {token}"})
        reply = conn.getresponse()
        assert reply.status == 200
        assert json.loads(reply.read()) == {"status": "ok", "servers": 1}
        conn.close()
        assert unix_status(tmp_path / "mcpd.sock", "/healthz") == 200
        assert unix_status(tmp_path / "work.sock", "/healthz") == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.communicate()


def test_a_port_taken_before_mcpd_starts_stops_it_before_any_server_runs(
    tmp_path: Path, port: int
) -> None:
    counted = tmp_path / "a.starts"
    cfg = write_config(tmp_path, port, f"[servers.a]\n{counted_server(counted)}\n")
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = serve(cfg)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"daemon.http_listen: cannot listen on 127.0.0.1:{port}" in err
    assert "Address already in use" in err
    assert starts(counted) == []
    # What it bound before the port is let go again: the next start finds no socket left.
    assert not (tmp_path / "mcpd.sock").exists()
    assert not (tmp_path / "work.sock").exists()


def test_a_port_taken_by_mcpd_s_own_user_names_the_process(tmp_path: Path, port: int) -> None:
    cfg = write_config(tmp_path, port, f"[servers.a]\n{counted_server(tmp_path / 'a.starts')}\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = serve(cfg)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    me = f"uid {os.getuid()} ({pwd.getpwuid(os.getuid()).pw_name})"
    assert f"Address already in use; {me} listens on it: process {os.getpid()} (" in err, err
    assert "another user" not in err


# Listens on 127.0.0.1:argv[1] (on argv[2], an IPv6 address, for IPv6 alone), says so,
# and holds the port until it is stopped.
_SQUAT = """
import socket, sys
if len(sys.argv) > 2:
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((sys.argv[2], int(sys.argv[1])))
else:
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
sys.stdin.read()
"""


@needs_root
async def test_a_port_taken_by_another_user_names_them_and_ends_the_token(
    tmp_path: Path, port: int
) -> None:
    """Hosts set up with `mcpd connect --http` had sent such a user the token while mcpd
    was down, and it worked once mcpd could start again; mcpd's error said only that the
    address was in use."""
    cfg = write_config(tmp_path, port, f"[servers.a]\n{counted_server(tmp_path / 'a.starts')}\n")
    (tmp_path / "state").mkdir(mode=0o700)
    token_file = tmp_path / "state" / "token"
    token_file.write_text("old-token-the-hosts-were-given\n")
    token_file.chmod(0o600)
    uid = peer_uid()
    squatter = await start_as(uid, _SQUAT, str(port), stdin=True)
    try:
        assert squatter.stdout is not None and squatter.stdin is not None
        assert (await squatter.stdout.receive_some(100)).startswith(b"listening")
        proc = serve(cfg)
        _, err = await trio.to_thread.run_sync(proc.communicate, None, 60)
    finally:
        squatter.kill()
        await squatter.wait()
    assert proc.returncode == 1
    assert f"another user, uid {uid} ({USER}), listens on it (process {squatter.pid} (" in err
    assert f"so mcpd replaced it in {token_file}" in err, err
    assert "`mcpd connect --http` again" in err
    new = token_file.read_text().strip()
    assert new and new != "old-token-the-hosts-were-given"


async def squatted_start(cfg: Path, port: int, *where: str) -> tuple[str, int]:
    """What mcpd says as it fails to start with the test user listening on ``port`` (at
    ``where``), and that user's process."""
    squatter = await start_as(peer_uid(), _SQUAT, str(port), *where, stdin=True)
    try:
        assert squatter.stdout is not None and squatter.stdin is not None
        assert (await squatter.stdout.receive_some(100)).startswith(b"listening")
        proc = serve(cfg)
        _, err = await trio.to_thread.run_sync(proc.communicate, None, 60)
    finally:
        squatter.kill()
        await squatter.wait()
    assert proc.returncode == 1
    return err, squatter.pid


def old_token(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir(mode=0o700)
    token_file = tmp_path / "state" / "token"
    token_file.write_text("old-token-the-hosts-were-given\n")
    token_file.chmod(0o600)
    return token_file


needs_ipv6 = pytest.mark.skipif(not socket.has_ipv6, reason="needs IPv6")


@needs_root
@needs_ipv6
async def test_another_user_on_the_ipv6_address_is_named_beside_root_on_every_ipv4_one(
    tmp_path: Path, port: int
) -> None:
    """Hosts reaching [::1] reach that user's socket, whoever listens on 0.0.0.0; mcpd
    named root's and kept the token."""
    cfg = write_config(tmp_path, port, one_server(tmp_path), listen="[::1]:{}")
    token_file = old_token(tmp_path)
    with socket.socket() as roots:
        roots.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        roots.bind(("0.0.0.0", port))
        roots.listen()
        err, pid = await squatted_start(cfg, port, "::1")
    assert f"another user, uid {peer_uid()} ({USER}), listens on it (process {pid} (" in err, err
    assert f"so mcpd replaced it in {token_file}" in err, err
    assert token_file.read_text().strip() != "old-token-the-hosts-were-given"


@needs_root
@needs_ipv6
async def test_another_user_on_every_ipv4_address_does_not_end_the_token_for_an_ipv6_one(
    tmp_path: Path, port: int
) -> None:
    """That user holds no address the hosts reach mcpd at; mcpd said it did, and replaced
    the token whenever mcpd's own user held the IPv6 one."""
    cfg = write_config(tmp_path, port, one_server(tmp_path), listen="[::1]:{}")
    token_file = old_token(tmp_path)
    squatter = await start_as(
        peer_uid(), _SQUAT.replace('"127.0.0.1"', '"0.0.0.0"'), str(port), stdin=True
    )
    try:
        assert squatter.stdout is not None
        assert (await squatter.stdout.receive_some(100)).startswith(b"listening")
        with socket.socket(socket.AF_INET6) as mine:
            mine.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            mine.bind(("::1", port))
            mine.listen()
            proc = serve(cfg)
            _, err = await trio.to_thread.run_sync(proc.communicate, None, 60)
    finally:
        squatter.kill()
        await squatter.wait()
    assert proc.returncode == 1
    assert f"uid 0 (root) listens on it: process {os.getpid()} (" in err, err
    assert "another user" not in err
    assert token_file.read_text().strip() == "old-token-the-hosts-were-given"


@needs_root
async def test_another_user_on_one_address_is_named_when_mcpd_tried_every_one(
    tmp_path: Path, port: int
) -> None:
    """Hosts reaching 127.0.0.1 reach that user's socket; mcpd named nobody."""
    cfg = write_config(tmp_path, port, one_server(tmp_path), listen="0.0.0.0:{}")
    token_file = old_token(tmp_path)
    err, pid = await squatted_start(cfg, port)
    assert f"another user, uid {peer_uid()} ({USER}), listens on it (process {pid} (" in err, err
    assert token_file.read_text().strip() != "old-token-the-hosts-were-given"


def one_server(tmp_path: Path) -> str:
    return f"[servers.a]\n{counted_server(tmp_path / 'a.starts')}\n"
