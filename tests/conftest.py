import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def python() -> str:
    """The interpreter running the tests, for spawning test servers."""
    return sys.executable
