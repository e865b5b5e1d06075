"""The tests' own layout: the tests of mcpd sit in the folder of the package they test,
each named for the module it tests (or in that folder's scenarios/, for a story through
a running daemon that no one module tells), and no test module imports another (what
tests share lives in a room of tests/support/ or in a conftest.py), so each can be read,
moved and run apart. docs/architecture.md ("The tests") tells the layout to a newcomer, and
what a name's aspect such as ``_daemon`` or ``_in_process`` says."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.reading.imports import imports_in

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
MCPD_TESTS = TESTS / "mcpd"
# The test folders that mirror a package's folder, module for module.
MIRRORED = ("mcpd", "protocol", "transports")
SUPPORT = TESTS / "support"
# Folders of tests/support that hold files tests read, not modules.
SUPPORT_DATA = frozenset({"data", "import_samples"})
# Where a test folder keeps its stories through a running daemon that cross many of its
# modules, each named for its story.
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


def source_folder(tests_folder: Path) -> Path:
    """The folder of the package whose modules a mirrored test folder's tests are named for."""
    folder = tests_folder.relative_to(TESTS)
    if folder.name == SCENARIOS:
        folder = folder.parent
    return ROOT / folder


def names_a_module(test_name: str, modules: frozenset[str]) -> bool:
    """``test_X.py`` or ``test_X_ASPECT.py``, where X is one of ``modules``."""
    tested = test_name.removeprefix("test_")
    return any(tested == m or tested.startswith(f"{m}_") for m in modules)


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
        package = folder.parent if folder.name == SCENARIOS else folder
        if not (ROOT / "mcpd" / package).is_dir():
            strays.append(f"{path.relative_to(ROOT)}: mcpd/{folder} is no package of mcpd")
        if path.is_dir() and not (path / "__init__.py").is_file():
            strays.append(f"{path.relative_to(ROOT)}: no __init__.py, so its modules' names clash")
    assert strays == [], "\n".join(strays)


def test_each_test_module_names_a_module_of_its_folder_or_is_a_scenario() -> None:
    unnamed = []
    for top in MIRRORED:
        for path in python_files(TESTS / top):
            if not path.name.startswith("test_") or path.parent.name == SCENARIOS:
                continue
            source = source_folder(path.parent)
            modules = frozenset(p.stem for p in source.glob("*.py"))
            if not names_a_module(path.stem, modules):
                unnamed.append(
                    f"{path.relative_to(ROOT)}: names no module of {source.relative_to(ROOT)}/"
                    f" (test_MODULE.py, test_MODULE_ASPECT.py, or a story in {SCENARIOS}/)"
                )
    assert unnamed == [], "\n".join(unnamed)


def test_what_tests_share_sits_in_a_room_of_tests_support_that_says_what_it_holds() -> None:
    strays = []
    for path in sorted(SUPPORT.iterdir()):
        if path.name in ("__init__.py", "__pycache__") or path.name in SUPPORT_DATA:
            continue
        where = path.relative_to(ROOT)
        if not path.is_dir():
            strays.append(f"{where}: not in a room of tests/support/")
            continue
        init = path / "__init__.py"
        if not init.is_file() or not ast.get_docstring(ast.parse(init.read_text(), str(init))):
            strays.append(f"{where}: no __init__.py whose docstring says what the room holds")
    assert strays == [], "\n".join(strays)
