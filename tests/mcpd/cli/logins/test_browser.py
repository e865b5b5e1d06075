"""Opening an address in the person's browser: which opener this desktop has (none on a
server or an SSH session without a display), only https or http to this machine taken
as an authorization page, and the page a secret address is handed over in: of this user
alone, its address never on a command line, and no way for the address to break out of
the page into markup or script of its own."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcpd.cli.logins.browser import (
    browser_argv,
    ended_by_signals,
    page_to,
    safe_to_open,
    write_page,
)

SECRET = "http://127.0.0.1:8765/?code=only-for-this-user"


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs


def tags_of(text: str) -> Tags:
    t = Tags()
    t.feed(text)
    return t


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    """The directory the daemon names for pages, as it makes it."""
    folder = tmp_path / "mcpd-pages"
    folder.mkdir(mode=0o700)
    return folder


def test_browser_argv_takes_browser_first_then_the_desktops_opener() -> None:
    assert browser_argv("https://x", {"BROWSER": "firefox --new-tab"}) == [
        "firefox",
        "--new-tab",
        "https://x",
    ]
    if shutil.which("xdg-open") and os.uname().sysname == "Linux":
        assert browser_argv("https://x", {"DISPLAY": ":0"}) == ["xdg-open", "https://x"]
    if os.uname().sysname == "Linux":
        assert browser_argv("https://x", {}) is None  # no display: nothing to open it in


def test_the_url_is_one_argument_whatever_it_holds() -> None:
    url = "https://x/?a=1;rm -rf ~ $(id) `id`"
    argv = browser_argv(url, {"BROWSER": "opener"})
    assert argv == ["opener", url]


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://auth.example.org/authorize?x=1", True),
        ("http://127.0.0.1:8765/", True),
        ("http://localhost/cb", True),
        ("http://[::1]:80/", True),
        ("http://auth.example.org/", False),
        ("javascript:alert(1)", False),
        ("JAVASCRIPT:alert(1)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("file:///etc/passwd", False),
        ("https:///nohost", False),
        ("http://localhost.evil.example/", False),
        ("http://127.0.0.1@evil.example/", False),
        ("http://[::1", False),
    ],
)
def test_only_https_or_http_to_this_machine_is_opened(url: str, ok: bool) -> None:
    assert safe_to_open(url) is ok


def test_a_page_is_the_users_alone_and_its_address_tells_nothing(pages: Path) -> None:
    address = write_page("dashboard.html", SECRET, str(pages))
    assert "code" not in address and address.startswith("file://")
    path = Path(urlsplit(address).path)
    assert path.parent == pages
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert 'content="no-referrer"' in text
    assert f"url='{SECRET}'" in text and f'href="{SECRET}"' in text


def test_an_address_cannot_break_out_of_the_page(pages: Path) -> None:
    hostile = 'https://x.example/?a="><script>alert(1)</script><img src=x onerror=alert(2)>'
    path = Path(urlsplit(write_page("h.html", hostile, str(pages))).path)
    t = tags_of(path.read_text())
    assert t.tags == ["meta", "meta", "meta", "title", "p", "a"]
    assert not any(k.startswith("on") or k == "src" for k, _ in t.attrs)
    assert ("href", hostile) in t.attrs


def test_a_directory_someone_made_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "mcpd-pages").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        write_page("dashboard.html", SECRET, str(tmp_path / "mcpd-pages"))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a path away")
@pytest.mark.parametrize("taken", ["link", "directory"])
def test_a_directory_another_user_took_the_name_of_gets_no_page_and_says_whose(
    tmp_path: Path, taken: str
) -> None:
    """As another user may in /tmp before the daemon makes its directory there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    named = tmp_path / "mcpd-pages-0"
    if taken == "link":
        named.symlink_to(elsewhere)
    else:
        named.mkdir(mode=0o700)
    os.lchown(named, 4242, 4242)
    with pytest.raises(OSError) as refused:
        write_page("dashboard.html", SECRET, str(named))
    said = "is a symbolic link of another" if taken == "link" else "belongs to another"
    assert f"{named} {said} user (uid 4242, " in str(refused.value)
    assert list(elsewhere.iterdir()) == []
    assert taken == "link" or list(named.iterdir()) == []


def test_a_directory_others_may_enter_is_refused(pages: Path) -> None:
    pages.chmod(0o755)
    with pytest.raises(OSError, match="open to other users"):
        write_page("dashboard.html", SECRET, str(pages))
    assert list(pages.iterdir()) == []


@pytest.mark.parametrize("named", [None, "", "relative/mcpd-pages", ["/tmp"]])
def test_without_a_directory_from_the_daemon_no_page_is_written(
    named: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not where the command's own environment would put it: the daemon, whose
    environment may differ, might not hide that from its servers."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(OSError, match="names no directory for the page"):
        write_page("dashboard.html", SECRET, named)
    assert list(tmp_path.iterdir()) == []


def test_a_login_page_lasts_as_long_as_the_block(pages: Path) -> None:
    with page_to(SECRET, str(pages)) as address:
        path = Path(urlsplit(address).path)
        assert path.exists() and re.fullmatch(r"login-[0-9a-f]{16}\.html", path.name)
    assert not path.exists()


def refresh_target(content: str) -> str:
    """Where a browser's refresh goes: after ``url=``, a quoted address ends at its
    closing quote."""
    rest = content.split("url=", 1)[1]
    if rest[:1] in ("'", '"'):
        return rest[1:].split(rest[0], 1)[0]
    return rest


def test_the_refresh_goes_to_the_whole_address_even_with_an_apostrophe(pages: Path) -> None:
    url = "https://auth.example.org/authorize?state=s&scope=it's&redirect_uri=http://127.0.0.1/cb"
    path = Path(urlsplit(write_page("q.html", url, str(pages))).path)
    refresh = [v for k, v in tags_of(path.read_text()).attrs if k == "content"][-1] or ""
    assert refresh_target(refresh) == url.replace("'", "%27")


def test_a_command_run_from_another_thread_than_the_main_one_sets_no_signal_handler() -> None:
    """An embedder runs mcpd's commands where signals cannot be received: the block runs,
    and the main thread's handlers are left as they are."""
    ran: list[BaseException | None] = []
    before = signal.getsignal(signal.SIGTERM)

    def command() -> None:
        try:
            with ended_by_signals():
                ran.append(None)
        except BaseException as exc:  # handed to the test, which says what it was
            ran.append(exc)

    thread = threading.Thread(target=command)
    thread.start()
    thread.join()
    assert ran == [None]
    assert signal.getsignal(signal.SIGTERM) is before
