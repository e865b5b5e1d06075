"""The layout's rules, checked on the code: no import cycles, and imports only in the
directions the design allows.

Every import statement of the three packages counts, wherever it is (inside
functions and ``if TYPE_CHECKING:`` blocks too): a cycle hidden behind
TYPE_CHECKING is still two modules that cannot be read, tested or replaced apart.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "transports", "mcpd")
# Modules that do I/O or run an event loop; protocol/ and the registry use none.
IO_MODULES = ("trio", "h11", "socket", "ssl", "subprocess", "asyncio", "selectors")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, as absolute dotted names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def our_modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found[module_name(path)] = path
    return found


MODULES = our_modules()


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges[name] = {t for t in imports_of(path) if t in MODULES and t != name}
    return edges


def externals(name: str) -> set[str]:
    """The top-level names of what ``name`` imports from outside our packages."""
    return {t.split(".")[0] for t in imports_of(MODULES[name]) if t.split(".")[0] not in PACKAGES}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


# (who, what it must not import, why)
FORBIDDEN = [
    ("protocol", "transports", "protocol/ is the sans-IO core: it imports nothing of ours"),
    ("protocol", "mcpd", "protocol/ is the sans-IO core: it imports nothing of ours"),
    ("transports", "mcpd", "transports move messages and know nothing of the daemon"),
    ("mcpd.agents", "transports", "the agent side sees servers only through its interfaces"),
    ("mcpd.servers", "mcpd.agents", "servers never know about agents"),
    ("mcpd.registry", "mcpd.servers", "the registry is bookkeeping: no I/O, no servers"),
    ("mcpd.registry", "mcpd.agents", "the registry is bookkeeping: no I/O, no agents"),
    ("mcpd.registry", "mcpd.host", "the registry is bookkeeping: no I/O"),
    ("mcpd.registry", "transports", "the registry is bookkeeping: no I/O"),
    ("mcpd.config", "mcpd.servers", "the config is a model and its loader, used by all"),
    ("mcpd.config", "mcpd.agents", "the config is a model and its loader, used by all"),
    ("mcpd.host", "mcpd.agents", "the host side serves the wiring, not the agents"),
    ("mcpd.host", "mcpd.servers", "the host side serves the wiring, not the servers"),
    ("mcpd.cli", "mcpd.servers", "the command line talks to the daemon over its socket"),
    ("mcpd.cli", "mcpd.agents.api", "the command line talks to the daemon over its socket"),
]


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize(("who", "banned", "why"), FORBIDDEN)
def test_no_import_goes_the_wrong_way(who: str, banned: str, why: str) -> None:
    wrong = sorted(
        f"{src} imports {dst}"
        for src, dsts in graph().items()
        if within(src, who)
        for dst in dsts
        if within(dst, banned)
    )
    assert not wrong, f"{why}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("who", ["protocol", "mcpd.registry"])
def test_pure_parts_do_no_io(who: str) -> None:
    wrong = sorted(
        f"{name} imports {ext}"
        for name in MODULES
        if within(name, who)
        for ext in externals(name)
        if ext in IO_MODULES
    )
    assert not wrong, f"{who} must not do I/O:\n" + "\n".join(wrong)


def test_the_checker_sees_cycles_and_wrong_directions() -> None:
    # A checker that found nothing because it read nothing would pass the tests above.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "mcpd.agents.api" in MODULES and "protocol.jsonrpc" in MODULES
    edges = graph()
    assert "mcpd.servers.supervisor" in edges["mcpd.servers.front"]
    assert "protocol.jsonrpc" in edges["transports.stdio.transport"]
