"""The daemon's own socket as it takes it up: bound at the config's path, taken from
what ``mcpd serve`` bound, or systemd's when it passed one, with the log saying where
mcpd listens when that is not where the config says."""

from __future__ import annotations

import logging
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.local.service.systemd import ListenSocket
from mcpd.starting.agents_listener import AgentsListener, take_listener
from mcpd.starting.listening import Listening


def config(path: Path, **daemon: Any) -> Config:
    return parse_config({"daemon": {"socket": str(path), **daemon}, "servers": {}}, env={})


@pytest.fixture
async def taken() -> AsyncIterator[list[AgentsListener]]:
    """What each test took: closed, and its socket file removed, at the end."""
    held: list[AgentsListener] = []
    yield held
    for each in held:
        await each.listener.aclose()
        each.listening.close()
        if each.owned is not None:
            each.owned.remove()


def passed_by_systemd(path: Path) -> ListenSocket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    return ListenSocket("mcpd.socket", sock)


async def test_without_systemd_the_socket_is_bound_at_the_configs_path(
    tmp_path: Path, taken: list[AgentsListener]
) -> None:
    path = tmp_path / "mcpd.sock"
    got = take_listener(config(path), str(path), [], None)
    taken.append(got)
    assert got.path == str(path) and got.owned is not None
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode) and mode & 0o777 == 0o600


async def test_what_mcpd_serve_bound_is_served_and_nothing_bound_again(
    tmp_path: Path, taken: list[AgentsListener]
) -> None:
    path = tmp_path / "mcpd.sock"
    prebound = Listening()
    prebound.bind(config(path), str(path))
    bound = prebound.socket
    assert bound is not None
    got = take_listener(config(path), str(path), [], prebound)
    taken.append(got)
    assert got.listening is prebound and prebound.socket is None
    assert got.owned is bound.file


async def test_systemds_socket_is_served_and_the_log_says_where_it_is(
    tmp_path: Path, taken: list[AgentsListener], caplog: pytest.LogCaptureFixture
) -> None:
    configured, passed = tmp_path / "mcpd.sock", tmp_path / "systemd.sock"
    caplog.set_level(logging.WARNING, "mcpd")
    got = take_listener(config(configured), str(configured), [passed_by_systemd(passed)], None)
    taken.append(got)
    assert got.path == str(passed) and got.owned is None
    assert not configured.exists()
    assert f"listening on {passed}, the socket systemd passed" in caplog.text


async def test_systemds_socket_at_the_configs_path_goes_unremarked(
    tmp_path: Path, taken: list[AgentsListener], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcpd.sock"
    caplog.set_level(logging.WARNING, "mcpd")
    got = take_listener(config(path), str(path), [passed_by_systemd(path)], None)
    taken.append(got)
    assert got.path == str(path) and caplog.text == ""


async def test_a_socket_systemd_passed_that_mcpd_cannot_serve_is_bound_here_instead(
    tmp_path: Path, taken: list[AgentsListener]
) -> None:
    path = tmp_path / "mcpd.sock"
    not_listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    not_listening.bind(str(tmp_path / "idle.sock"))
    try:
        got = take_listener(config(path), str(path), [ListenSocket("x", not_listening)], None)
    finally:
        not_listening.close()
    taken.append(got)
    assert got.path == str(path) and got.owned is not None


async def test_groups_the_sockets_mode_shuts_out_are_warned_of(
    tmp_path: Path, taken: list[AgentsListener], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcpd.sock"
    caplog.set_level(logging.WARNING, "mcpd")
    got = take_listener(config(path, allow_groups=["root"]), str(path), [], None)
    taken.append(got)
    assert "the members of root cannot open the socket file" in caplog.text
