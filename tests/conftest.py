import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.system import bubblewrap
from transports.stdio.process import pidgroup

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def python() -> str:
    """The interpreter running the tests, for spawning test servers."""
    return sys.executable


@pytest.fixture(scope="session", autouse=True)
def _bubblewrap() -> Iterator[None]:
    """Every server the tests start runs in the sandbox a user's would get."""
    bubblewrap.ensure()
    yield
    pidgroup.close()  # the in-process daemons' servers' cgroups, when run as root


@pytest.fixture(scope="session", autouse=True)
def _session_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Daemons started by tests (in process or as children) keep their state file under
    the test run's directory, never in the user's or in /var/lib/mcpd. This one covers
    daemons that module fixtures start; each test then gets its own below."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        mp.delenv("STATE_DIRECTORY", raising=False)
        yield


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Tests against third-party servers are marked by where they live, so
    # `pytest -m "not interop"` runs without the peers installed.
    interop = ROOT / "tests" / "interop"
    for item in items:
        if interop in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.interop)
