"""A real browser for the page's tests: Debian's headless Chromium, driven by Selenium
through Debian's chromedriver (never a browser download).

As root, a machine without them gets them with apt (``chromium`` and
``chromium-driver``), as the real-systemd tests get their tools: ``make test`` then
needs nothing installed by hand. ``MCPD_REQUIRE_BROWSER_TESTS=1`` (set by ``make test``
as root) turns a machine that cannot run them into a failure instead of a skip.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
PACKAGES = ("chromium", "chromium-driver")
REQUIRED = os.environ.get("MCPD_REQUIRE_BROWSER_TESTS") == "1"
# Where the tests leave what a person may want to look at (screenshots): git-ignored.
ARTIFACTS = ROOT / "tests" / ".artifacts"
# This machine's network is closed: nothing in the browser may try to reach out.
FLAGS = (
    "--headless",
    "--no-sandbox",  # as root, Chromium's own sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def _missing() -> bool:
    return not (os.access(CHROMIUM, os.X_OK) and os.access(DRIVER, os.X_OK))


def _install() -> str | None:
    """Install the browser with apt where it is missing; why not, if it cannot be."""
    if not _missing():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "chromium and chromium-driver are not installed (apt-get install them as root)"
    cache = Path(os.environ.get("MCPD_TEST_CACHE") or Path.home() / ".cache" / "mcpd-tests")
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(cache / "apt.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _missing():
            return None
        for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
            done = subprocess.run(
                argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=900, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                return f"{' '.join(argv[:2])} failed: {(done.stdout + done.stderr)[-2000:]}"
    return None


def skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"browser tests required but impossible: {reason}")
    pytest.skip(f"browser tests: {reason}")


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A fresh headless Chromium (its own profile directory), closed on the way out."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip_or_fail("selenium is not installed (pip install -e '.[test]')")
        raise
    problem = _install()
    if problem is not None:
        skip_or_fail(problem)
    with tempfile.TemporaryDirectory(prefix="mcpd-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(DRIVER))
        try:
            yield driver
        finally:
            driver.quit()


def artifacts(name: str) -> Path:
    """A folder for one test module's output, said on the terminal once made."""
    path = ARTIFACTS / name
    path.mkdir(parents=True, exist_ok=True)
    print(f"\n[browser] screenshots in {path}")
    return path
