"""What a module imports, read from its source: every import statement, wherever it is,
as absolute dotted names."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, as absolute dotted names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    yield from imports_in(ast.parse(path.read_text(), str(path)), package)


def imports_in(tree: ast.Module, package: str) -> Iterator[str]:
    """Every module a parsed module of ``package`` imports, as absolute dotted names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            # "from . import x" and "from pkg import module" name modules too.
            for alias in node.names:
                yield f"{target}.{alias.name}"
