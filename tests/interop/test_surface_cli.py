"""``mcpd prompts``, ``mcpd resources``, ``mcpd read``, ``mcpd prompt``, the status
counts and ``GET /prompts``, ``GET /resources``: a real ``mcpd serve`` over two
folder servers, used the way a person would."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FOLDER = str(Path(__file__).with_name("servers") / "folder_server.py")
MCPD = [sys.executable, "-m", "mcpd"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("cli")
    servers = []
    for alias in ("a", "b"):
        folder = base / f"folder-{alias}"
        folder.mkdir()
        (folder / "README.md").write_text(f"readme of {alias}\n")
        args = json.dumps([FOLDER, str(folder), "stdio"])
        servers.append(f'[servers.{alias}]\ncommand = "{sys.executable}"\nargs = {args}\n')
    sock = base / "mcpd.sock"
    config = base / "config.toml"
    # The state directory apart from the folders: no server may see into it.
    state = base / "state"
    config.write_text(f'[daemon]\nsocket = "{sock}"\nstate_dir = "{state}"\n' + "".join(servers))
    proc = subprocess.Popen(
        [*MCPD, "serve", "--config", str(config), "--log", "stderr"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if f"listening on {sock}" in line:
                break
        else:
            pytest.fail("mcpd serve exited before it was ready")
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def mcpd(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPD, *args, "--socket", str(sock)], capture_output=True, text=True, timeout=60
    )


def test_prompts_and_resources_are_listed(daemon: Path) -> None:
    prompts = mcpd(daemon, "prompts")
    assert prompts.returncode == 0, prompts.stderr
    assert "mcp__a__review(name)" in prompts.stdout and "2 prompts" in prompts.stdout
    resources = mcpd(daemon, "resources")
    assert resources.returncode == 0, resources.stderr
    assert "mcpd://a/file:///README.md" in resources.stdout
    assert "mcpd://b/file:///{name}" in resources.stdout
    assert "2 resources, 2 templates" in resources.stdout
    listed = json.loads(mcpd(daemon, "resources", "--json").stdout)
    assert len(listed["resources"]) == 2 and len(listed["resourceTemplates"]) == 2


def test_a_resource_is_read_and_a_prompt_got(daemon: Path) -> None:
    read = mcpd(daemon, "read", "mcpd://b/file:///README.md")
    assert (read.returncode, read.stdout) == (0, "readme of b\n")
    ambiguous = mcpd(daemon, "read", "file:///README.md")
    assert ambiguous.returncode == 1
    assert "mcpd://a/file:///README.md, mcpd://b/file:///README.md" in ambiguous.stderr
    prompt = mcpd(daemon, "prompt", "mcp__a__review", '{"name": "README.md"}')
    assert prompt.returncode == 0, prompt.stderr
    assert prompt.stdout.splitlines() == [
        "user: Please review README.md from folder-a:",
        "user: [resource mcpd://a/file:///README.md]",
        "readme of a",
        "",
    ]
    bad = mcpd(daemon, "prompt", "mcp__a__review", "[1]")
    assert bad.returncode == 2


def test_status_counts_prompts_and_resources(daemon: Path) -> None:
    status = mcpd(daemon, "status")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert "2 prompts, 2 resources" in lines[0]
    header = lines[1].split()
    assert header[:6] == ["SERVER", "STATE", "ERA", "TOOLS", "PRMPT", "RES"]
    row = next(line.split() for line in lines if line.startswith("a "))
    assert row[4:6] == ["1", "1+1"]  # one prompt; one resource and one template


def get(sock: Path, path: str) -> tuple[int, dict[str, object]]:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(sock))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: mcpd\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_the_socket_serves_prompts_and_resources_over_http(daemon: Path) -> None:
    status, prompts = get(daemon, "/prompts")
    assert status == 200
    assert sorted(p["name"] for p in prompts["prompts"]) == ["mcp__a__review", "mcp__b__review"]
    status, resources = get(daemon, "/resources")
    assert status == 200
    assert sorted(r["uri"] for r in resources["resources"]) == [
        "mcpd://a/file:///README.md",
        "mcpd://b/file:///README.md",
    ]
    assert len(resources["resourceTemplates"]) == 2
