"""``mcpd dashboard`` (``mcpd.cli.logins.dashboard``) run in this process against a stand-in
daemon: the one-time address printed with how long it lasts, the way to turn the
endpoint on when it is off, and the reply's words never acting on the terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpd.cli.logins import dashboard
from mcpd.cli.main import main
from tests.support.daemons.fake import FakeDaemon, error, result
from tests.support.parts.status_rows import daemon as daemon_status
from tests.support.parts.status_rows import document

URL = "http://127.0.0.1:8765/login?code=abc"
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "mcpd.sock"


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    """The directory the daemon names for pages, as it makes it."""
    folder = tmp_path / "daemon-run" / "mcpd-pages"
    folder.mkdir(mode=0o700, parents=True)
    return folder


@pytest.fixture(autouse=True)
def no_desktop(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """No browser is ever started; what would have been is noted."""
    opened: list[list[str]] = []

    def opener(argv: list[str]) -> str | None:
        opened.append(argv)
        return None

    monkeypatch.setattr(dashboard, "open_in_browser", opener)
    for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    return opened


def run(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    code = done.value.code
    assert isinstance(code, int)
    return code


def status_of(**fields: Any) -> Any:
    """The daemon's answer to ``mcpd/status``, of a daemon with no servers that says
    ``fields`` of itself, as its JSON reads."""
    return msgspec.to_builtins(document(daemon_status(**fields)))


def daemon(sock: Path, login: Any, status: Any = None) -> FakeDaemon:
    def answer(msg: dict[str, Any]) -> bytes:
        if msg["method"] == "mcpd/auth/dashboard":
            return login(msg) if callable(login) else result(msg, login)
        return result(msg, status)

    return FakeDaemon(sock, answer)


def test_the_address_is_printed_with_how_long_it_works(
    sock: Path, capsys: pytest.CaptureFixture[str], no_desktop: list[list[str]]
) -> None:
    with daemon(sock, {"url": URL, "expires_in": 90}) as d:
        assert run("dashboard", "--socket", str(sock)) == 0
    out, err = capsys.readouterr()
    assert f"\n  {URL}\n" in out and "within 90 seconds" in out
    assert err == "" and no_desktop == []
    assert [r["method"] for r in d.requests] == ["mcpd/auth/dashboard"]


def test_without_a_lifetime_the_address_is_said_to_last_a_minute(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, {"url": URL}):
        assert run("dashboard", "--socket", str(sock), "--no-browser") == 0
    assert "within 60 seconds" in capsys.readouterr().out


def test_a_browser_is_given_a_page_not_the_address(
    sock: Path,
    tmp_path: Path,
    pages: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_desktop: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In the directory the daemon names, not where the command's own environment
    would put it."""
    monkeypatch.setenv("BROWSER", "my-browser --new-tab")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    while_waiting: list[str] = []

    def answer(msg: dict[str, Any]) -> bytes:
        if msg["method"] == "mcpd/auth/dashboard_spent":
            # What the browser may still read while the daemon has not seen the code used.
            while_waiting.extend(p.read_text() for p in pages.iterdir())
            return result(msg, {})
        return result(msg, {"url": URL, "expires_in": 30, "pages": str(pages)})

    with FakeDaemon(sock, answer) as d:
        assert run("dashboard", "--socket", str(sock)) == 0
    [argv] = no_desktop
    assert argv[:2] == ["my-browser", "--new-tab"]
    assert "code=abc" not in " ".join(argv)  # the one-time code is off the command line
    [page] = while_waiting
    assert "code=abc" in page and argv[2].startswith(pages.as_uri() + "/")
    assert not (tmp_path / "mcpd-pages").exists()
    # Once the daemon says the code is spent, it is on disk no more.
    assert list(pages.iterdir()) == []
    assert d.requests[-1]["method"] == "mcpd/auth/dashboard_spent"
    assert d.requests[-1]["params"]["code"] == "abc"
    assert "waiting for the browser to open it (at most 30 seconds)" in capsys.readouterr().err
    again = tmp_path / "again.sock"
    with daemon(again, {"url": URL}):
        assert run("dashboard", "--socket", str(again), "--no-browser") == 0
    assert len(no_desktop) == 1


def test_a_daemon_that_names_no_directory_gets_no_page(
    sock: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_desktop: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An older daemon: where the command would put the page, it may not hide it from
    its servers. The address is printed for the person to open."""
    monkeypatch.setenv("BROWSER", "my-browser")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with daemon(sock, {"url": URL}) as d:
        assert run("dashboard", "--socket", str(sock)) == 0
    out, err = capsys.readouterr()
    assert f"\n  {URL}\n" in out
    assert err.startswith("mcpd: not opening a browser: the daemon names no directory")
    assert no_desktop == [] and not (tmp_path / "mcpd-pages").exists()
    assert [r["method"] for r in d.requests] == ["mcpd/auth/dashboard"]


def test_the_page_is_removed_when_the_wait_for_its_code_ends_otherwise(
    sock: Path, pages: Path, monkeypatch: pytest.MonkeyPatch, no_desktop: list[list[str]]
) -> None:
    monkeypatch.setenv("BROWSER", "my-browser")

    def answer(msg: dict[str, Any]) -> bytes:
        if msg["method"] == "mcpd/auth/dashboard_spent":
            return error(msg, -32601, "method not found")
        return result(msg, {"url": URL, "pages": str(pages)})

    with FakeDaemon(sock, answer):
        assert run("dashboard", "--socket", str(sock)) == 1
    assert len(no_desktop) == 1
    assert list(pages.iterdir()) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_command_ended_by_a_signal_leaves_no_page(
    sock: Path, pages: Path, signum: signal.Signals
) -> None:
    waiting, done = threading.Event(), threading.Event()
    seen: list[str] = []

    def answer(msg: dict[str, Any]) -> bytes | None:
        if msg["method"] == "mcpd/auth/dashboard_spent":
            seen.extend(p.name for p in pages.iterdir())
            waiting.set()
            done.wait()  # the code is never used
            return None
        return result(msg, {"url": URL, "pages": str(pages)})

    env = {**os.environ, "BROWSER": "true"}
    with FakeDaemon(sock, answer):
        command = subprocess.Popen(
            [sys.executable, "-m", "mcpd", "dashboard", "--socket", str(sock)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            waiting.wait()
            command.send_signal(signum)
            assert command.wait() == 128 + signum
        finally:
            done.set()
            command.kill()
            command.wait()
    assert len(seen) == 1  # it was there while the command waited
    assert list(pages.iterdir()) == []


def test_with_the_endpoint_off_it_says_how_to_turn_it_on_and_fails(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = status_of(config="/etc/mcpd/config.toml", socket="/run/mcpd.sock")
    with daemon(sock, {"url": None}, status) as d:
        assert run("dashboard", "--socket", str(sock)) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "http_listen" in err and "in /etc/mcpd/config.toml" in err
    assert "curl --unix-socket /run/mcpd.sock http://mcpd/" in err
    assert [r["method"] for r in d.requests] == ["mcpd/auth/dashboard", "mcpd/status"]


def test_a_daemon_without_a_config_file_is_not_sent_to_the_default_one(
    sock: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mcpd serve --demo`` reads no config file: editing the default one would never
    turn its endpoint on."""
    monkeypatch.setenv("MCPD_CONFIG", "/home/ada/.config/mcpd/config.toml")
    status = status_of(config=None, socket="/tmp/demo.sock")
    with daemon(sock, {"url": None}, status):
        assert run("dashboard", "--socket", str(sock)) == 1
    err = capsys.readouterr().err
    assert "config.toml" not in err
    assert "started without a config file" in err and "--config FILE" in err
    assert 'http_listen = "127.0.0.1:8765"' in err
    assert "curl --unix-socket /tmp/demo.sock http://mcpd/" in err


def test_the_hint_falls_back_when_the_status_names_no_config_or_socket(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, {}, status_of()):
        assert run("dashboard", "--socket", str(sock)) == 1
    assert "curl --unix-socket SOCKET " in capsys.readouterr().err


def test_paths_in_the_hint_cannot_drive_the_terminal(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = status_of(config="/tmp/\x1b[2Jc.toml", socket="/tmp/s\u202e.sock")
    with daemon(sock, {}, status):
        assert run("dashboard", "--socket", str(sock)) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err
    assert "/tmp/\\x1b[2Jc.toml" in err


def test_a_refusal_is_the_daemons_message_and_exit_1(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(msg: dict[str, Any]) -> bytes:
        return error(msg, -32001, "only mcpd's own user may log a browser in")

    with daemon(sock, refuse):
        assert run("dashboard", "--socket", str(sock)) == 1
    assert capsys.readouterr().err == "mcpd: only mcpd's own user may log a browser in\n"


def test_no_daemon_is_exit_3(sock: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("dashboard", "--socket", str(sock)) == 3
    assert str(sock) in capsys.readouterr().err


@pytest.mark.parametrize(
    "login",
    [
        {"url": URL, "expires_in": "soon"},
        {"url": URL, "expires_in": [60]},
        {"url": URL, "expires_in": True},
        {"url": f"{URL}\x1b[2J\x1b[Hfake"},
        {"url": URL, "pages": 5},
        {"url": 8765},
        [URL],
        "url",
    ],
)
def test_a_reply_of_the_wrong_shape_is_a_reply_that_cannot_be_read(
    sock: Path, capsys: pytest.CaptureFixture[str], login: Any
) -> None:
    with daemon(sock, login, status_of()):
        assert run("dashboard", "--socket", str(sock), "--no-browser") == 4
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert err.startswith("mcpd: ") and len(err.splitlines()) == 1


def other_shapes() -> list[Any]:
    """Statuses a command of this version cannot read: the daemon's paths not text
    among them, which no sentence could name."""
    whole = status_of(socket="/s")
    return [
        None,
        [],
        {"daemon": "up"},
        {"daemon": ["x"]},
        {**whole, "daemon": {**whole["daemon"], "config": 5}},
        {**whole, "daemon": {**whole["daemon"], "socket": ["/s"]}},
        {"daemon": {"config": "/etc/mcpd/config.toml", "socket": "/s"}},
    ]


@pytest.mark.parametrize("status", other_shapes())
def test_a_status_of_the_wrong_shape_is_a_reply_that_cannot_be_read(
    sock: Path, capsys: pytest.CaptureFixture[str], status: Any
) -> None:
    with daemon(sock, {"url": None}, status):
        assert run("dashboard", "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/status could not be read (")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_address_of_the_wrong_shape_is_said_to_be_the_answer_to_its_method(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, {"url": URL, "pages": ["/run/user/1000/mcpd-pages"]}):
        assert run("dashboard", "--socket", str(sock), "--no-browser") == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/auth/dashboard could not be read (")
    assert "$.pages" in err
