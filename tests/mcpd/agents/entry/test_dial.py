"""How mcpd's own clients connect to the daemon's socket: a full listen queue is waited
out, and said as such when it stays full."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from mcpd.agents.entry.dial import ForeignSocket, QueueFull, connect_unix
from tests.support.system.full_queue import full_queue, waiting_for_room


def test_a_client_that_finds_the_queue_full_gets_in_once_there_is_room(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    got: list[socket.socket | BaseException] = []
    tids: list[int] = []
    started = threading.Event()

    def connect() -> None:
        tids.append(threading.get_native_id())
        started.set()
        try:
            got.append(connect_unix(str(path), wait=60))
        except BaseException as exc:  # handed to the test, which says what it was
            got.append(exc)

    with full_queue(path) as listener:
        thread = threading.Thread(target=connect)
        thread.start()
        started.wait()
        waited = waiting_for_room(thread, tids[0])
        listener.accept()[0].close()  # a filler: room for one
        ours, _ = listener.accept()
        thread.join()
        with ours:
            assert waited, f"the connect did not wait for room: {got}"
            (client,) = got
            assert isinstance(client, socket.socket)
            with client:
                client.sendall(b"hello\n")
                assert ours.recv(16) == b"hello\n"


def test_a_queue_that_stays_full_is_said_as_such_naming_the_socket(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    with full_queue(path), pytest.raises(QueueFull) as raised:
        connect_unix(str(path), wait=0.2)
    assert str(path) in str(raised.value) and "listen queue stayed full" in str(raised.value)


def test_no_listener_is_said_at_once(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        connect_unix(str(tmp_path / "none.sock"))
    stale = tmp_path / "stale.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(stale))
    with bound, pytest.raises(ConnectionRefusedError):
        connect_unix(str(stale))


def test_a_full_queue_of_another_users_socket_is_not_waited_for(tmp_path: Path) -> None:
    """Anyone can make a socket whose queue stays full: one not made by this user, root
    or the service's user is refused at once, naming its owner."""
    path = tmp_path / "mcpd.sock"
    with full_queue(path):
        os.chown(path, 4242, 4242)
        with pytest.raises(ForeignSocket) as raised:  # not QueueFull, after the wait
            connect_unix(str(path), wait=30)
    assert str(path) in str(raised.value) and "uid 4242" in str(raised.value)
