"""The tests' own layout: the tests of mcpd sit in the folder of the package they test,
and no test module imports another (what tests share lives in tests/support/ or in a
conftest.py), so each can be read, moved and run apart."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.imports import imports_in

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
MCPD_TESTS = TESTS / "mcpd"
# Folders of tests/mcpd with no package of that name under mcpd/: daemon/ holds the
# daemon-wide tests and those of mcpd's top-level modules (daemon.py, reread.py,
# status_report.py, serve.py, prestart.py, config_hold.py, oversight.py, agents_listener.py,
# signals.py, listening.py).
NOT_PACKAGES = frozenset({Path("daemon")})
# A folder of tests/mcpd may hold a scenarios/ of its own: stories through a running daemon
# that cross many of its modules.
SCENARIOS = "scenarios"


def python_files(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*.py")):
        parts = path.relative_to(top).parts
        if "node_modules" in parts or "__pycache__" in parts:
            continue
        yield path


def package_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] != "__init__":
        parts.pop()
    return ".".join(parts)


def is_test_module(name: str) -> bool:
    return name.rpartition(".")[2].startswith("test_")


def test_no_test_module_imports_another_test_module() -> None:
    found = []
    for path in python_files(TESTS):
        tree = ast.parse(path.read_text(), str(path))
        for target in sorted(set(imports_in(tree, package_of(path)))):
            if is_test_module(target):
                found.append(f"{path.relative_to(ROOT)} imports {target}")
    assert found == [], "\n".join(found)


def test_the_tests_of_mcpd_sit_in_the_folder_of_a_package_of_mcpd() -> None:
    strays = []
    for path in sorted(MCPD_TESTS.rglob("*")):
        folder = (
            path.relative_to(MCPD_TESTS) if path.is_dir() else path.parent.relative_to(MCPD_TESTS)
        )
        if "__pycache__" in folder.parts or path.name == "__pycache__":
            continue
        if folder == Path("."):
            if path.is_file() and path.name != "__init__.py":
                strays.append(f"{path.relative_to(ROOT)}: not in a package's folder")
            continue
        package = folder.parent if folder.name == SCENARIOS else folder
        if package not in NOT_PACKAGES and not (ROOT / "mcpd" / package).is_dir():
            strays.append(f"{path.relative_to(ROOT)}: mcpd/{folder} is no package of mcpd")
        if path.is_dir() and not (path / "__init__.py").is_file():
            strays.append(f"{path.relative_to(ROOT)}: no __init__.py, so its modules' names clash")
    assert strays == [], "\n".join(strays)
