"""``mcpd serve`` starts its stdio servers before it imports trio and the daemon, and
each server's first start takes the process started for it: every server starts once,
however it gets there, and none is left running by a daemon that did not get going."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import trio

from mcpd.config.tables.model import Config, DaemonConfig
from mcpd.config.tables.servertable import ServerConfig
from mcpd.starting import prestart
from tests.support.servers.counting_starts import counted_server, starts
from tests.support.system.procs import wait_gone
from transports.stdio.process import early

# `mcpd serve` as the console script runs it, noting whether trio was loaded when the
# servers were started early; once an agent has listed the tools it prints what it saw
# and stops the daemon as systemd would.
CHILD = """
import json, os, signal, sys, threading, time
import mcpd.starting.prestart as prestart
from mcpd.cli.client import Client, DaemonUnreachable
from mcpd.cli.main import main

seen = {}
original = prestart.start_early

def start_early(config, socket):
    seen["trio_loaded"] = "trio" in sys.modules
    seen["pids"] = original(config, socket)
    return seen["pids"]

prestart.start_early = start_early

def watch(path):
    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(path) as client:
                seen["tools"] = sorted(t["name"] for t in client.list_tools())
            break
        except DaemonUnreachable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    print(json.dumps(seen), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, args=(sys.argv[2],), daemon=True).start()
main(["serve", "--config", sys.argv[1], "--log", "stderr", "--log-level", "debug"])
"""


def write_config(tmp_path: Path, servers: dict[str, str]) -> tuple[Path, Path]:
    cfg = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    text = f'[daemon]\nsocket = "{sock}"\nstate_dir = "{tmp_path / "state"}"\n'
    for alias, body in servers.items():
        text += f"[servers.{alias}]\n{body}\n"
    cfg.write_text(text)
    return cfg, sock


def test_each_server_starts_once_and_before_trio_is_imported(tmp_path: Path) -> None:
    files = {alias: tmp_path / f"{alias}.starts" for alias in ("a", "b", "later", "off")}
    (tmp_path / "granted").mkdir()  # held afresh, under another descriptor, at each start
    cfg, sock = write_config(
        tmp_path,
        {
            "a": counted_server(files["a"]),
            "b": counted_server(files["b"], f'read = ["{tmp_path / "granted"}"]'),
            "later": counted_server(files["later"], 'start = "lazy"'),
            "off": counted_server(files["off"], "enabled = false"),
        },
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(cfg), str(sock)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    seen: dict[str, Any] = json.loads(out.stdout)
    assert seen["trio_loaded"] is False
    # The early processes are the ones that serve: each server started exactly once,
    # in its sandbox (whose PID namespace numbers its processes from 1), and no early
    # one was left unused.
    assert len(seen["pids"]) == 2
    assert len(starts(files["a"])) == len(starts(files["b"])) == 1
    assert {"mcp__a__tool1", "mcp__b__tool1"} <= set(seen["tools"])
    # A lazy server is started by its runner (here to learn its tools), a disabled one
    # never; neither early.
    assert len(starts(files["later"])) == 1
    assert starts(files["off"]) == []
    assert "was not used" not in out.stderr


def serve(cfg: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(cfg), "--log", "stderr", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_a_second_daemon_on_a_live_socket_starts_no_server(tmp_path: Path) -> None:
    counted = tmp_path / "a.starts"
    cfg, sock = write_config(tmp_path, {"a": counted_server(counted)})
    first = serve(cfg)
    try:
        with trio.fail_after(30):
            while not sock.exists() or not starts(counted):
                await trio.sleep(0.05)
        # A state directory of its own: the first daemon's is locked before its socket.
        other = tmp_path / "other.toml"
        other.write_text(cfg.read_text().replace(str(tmp_path / "state"), str(tmp_path / "b")))
        second = subprocess.run(
            [sys.executable, "-m", "mcpd", "serve", "--config", str(other), "--log", "stderr"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 78  # the same on every start: no use restarting
        assert "something already listens on" in second.stderr
        # What to do: a socket of its own, as the README's demo says to give one.
        assert "give it a socket of its own with --socket PATH, or MCPD_SOCKET" in second.stderr
        assert len(starts(counted)) == 1
    finally:
        first.terminate()
        first.wait(timeout=30)


def test_a_daemon_that_cannot_listen_starts_no_server(tmp_path: Path) -> None:
    counted = tmp_path / "a.starts"
    cfg, sock = write_config(tmp_path, {"a": counted_server(counted)})
    sock.write_text("not a socket")  # refused by the listener, bound before any server
    proc = serve(cfg, "--log-level", "debug")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 78
    assert "is not a socket" in err
    assert starts(counted) == []


async def test_a_daemon_that_stops_after_its_start_leaves_no_early_server_running(
    tmp_path: Path,
) -> None:
    counted = tmp_path / "a.starts"
    cfg, _ = write_config(tmp_path, {"a": counted_server(counted)})
    # Judged once the servers have listed their tools: after they started early.
    cfg.write_text(cfg.read_text() + '[profiles.none]\ntools = { allow = ["nothing_*"] }\n')
    proc = serve(cfg, "--log-level", "debug")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 78
    assert "profiles.none.tools" in err
    assert len(starts(counted)) == 1
    # The process mcpd started (its sandbox's, which takes the server along with it).
    [pid] = map(int, re.findall(r"a: started early \(pid (\d+)\)", err))
    assert await wait_gone(pid, timeout=5), "a server started early outlived its daemon"


def check_config(cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_config_string_the_system_cannot_take_stops_serve_before_any_server_starts(
    tmp_path: Path,
) -> None:
    counted = tmp_path / "a.starts"
    cfg, _ = write_config(
        tmp_path,
        {"a": counted_server(counted), "b": counted_server(tmp_path / "b.starts")},
    )
    cfg.write_text(cfg.read_text() + '[servers.b.env]\n"A=B" = "1"\n')
    said = 'servers.b.env.A=B: a variable name cannot contain "="'
    checked = check_config(cfg)
    assert checked.returncode == 78 and said in checked.stderr
    proc = serve(cfg)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 78
    assert said in err and "Traceback" not in err
    assert starts(counted) == []


def test_a_config_nested_too_deeply_stops_serve_naming_the_file(tmp_path: Path) -> None:
    cfg, _ = write_config(tmp_path, {})
    cfg.write_text(cfg.read_text() + "x = " + "[" * 5000 + "]" * 5000 + "\n")
    said = f"{cfg}: nested more than 100 levels deep"
    checked = check_config(cfg)
    assert checked.returncode == 78 and said in checked.stderr
    proc = serve(cfg)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 78
    assert said in err and "Traceback" not in err


def test_a_server_the_system_cannot_start_early_leaves_the_others_started(
    tmp_path: Path,
) -> None:
    """Whatever reached it unchecked: the one server is left to its runner."""
    good = ServerConfig(command="/bin/sleep", args=["60"], sandbox="off")
    refused = [
        msgspec.structs.replace(good, env={"A=B": "1"}),
        msgspec.structs.replace(good, args=["6\0"]),
        msgspec.structs.replace(good, cwd="/tmp\0"),
    ]
    servers = {"good": good} | {f"bad{i}": s for i, s in enumerate(refused)}
    config = Config(
        daemon=DaemonConfig(socket=str(tmp_path / "mcpd.sock"), state_dir=str(tmp_path / "st")),
        servers=servers,
    )
    try:
        pids = prestart.start_early(config, None)
        assert len(pids) == 1
        assert early.waiting() == pids
    finally:
        early.discard()


# Ctrl-C as `mcpd serve` reads trio and the daemon, once its servers started early:
# before the daemon hears signals.
INTERRUPTED = """
import os, signal, sys
import mcpd.starting.prestart as prestart
from mcpd.cli.main import main

original = prestart.start_early

def start_early(config, socket):
    pids = original(config, socket)
    os.kill(os.getpid(), signal.SIGINT)
    return pids

prestart.start_early = start_early
main(["serve", "--config", sys.argv[1], "--log", "stderr", "--log-level", "debug"])
"""


async def test_ctrl_c_before_the_daemon_hears_it_leaves_no_socket_and_no_server(
    tmp_path: Path,
) -> None:
    cfg, sock = write_config(tmp_path, {"a": counted_server(tmp_path / "a.starts")})
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(cfg)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert "stopping before the start was done" in done.stderr
    assert "Traceback" not in done.stderr
    assert not sock.exists(), "the socket file outlived its daemon"
    [pid] = map(int, re.findall(r"a: started early \(pid (\d+)\)", done.stderr))
    assert await wait_gone(pid, timeout=5), "a server started early outlived its daemon"
