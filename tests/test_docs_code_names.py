"""What README and docs/ name in the code is there: every module path they give and
every ``Class.method`` they name, and on the architecture page, which names only code,
every ``module.function`` too; so a reader who follows one lands where it says. A name
of a class is looked up in every class of that name, with what it inherits from
classes of ours. (Elsewhere ``a.b`` is as often a config key or a file name.)"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "transports", "mcpd")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# Where a path in the docs may start: at the top, or inside one of the packages.
PATH_ROOTS = (ROOT, *(ROOT / p for p in PACKAGES))
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^[\w/]+\.py$")
_DOTTED = re.compile(r"^([A-Za-z_]\w*)\.([A-Za-z_]\w*)$")


def code_spans(text: str) -> Iterator[str]:
    """The inline code of a Markdown text, outside fenced blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    yield from _CODE.findall(prose)


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


class Names:
    """The classes and modules of ours, and what each defines."""

    def __init__(self) -> None:
        self.members: dict[str, list[set[str]]] = defaultdict(list)
        self.bases: dict[str, list[list[str]]] = defaultdict(list)
        self.modules: dict[str, list[set[str]]] = defaultdict(list)
        for path in source_files():
            tree = ast.parse(path.read_text(), str(path))
            self.modules[path.stem].append(defined(tree.body))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.members[node.name].append(members(node))
                    self.bases[node.name].append([base_name(b) for b in node.bases])

    def has(self, cls: str, member: str, seen: frozenset[str] = frozenset()) -> bool:
        if cls in seen:
            return False
        if any(member in found for found in self.members.get(cls, [])):
            return True
        return any(
            self.has(base, member, seen | {cls})
            for bases in self.bases.get(cls, [])
            for base in bases
        )


def base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return base_name(node.value)
    return node.id if isinstance(node, ast.Name) else ""


def defined(body: list[ast.stmt]) -> set[str]:
    """The names a module's or a class's body binds."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def members(cls: ast.ClassDef) -> set[str]:
    """A class's own members: its body's names, and the attributes its methods set."""
    names = defined(cls.body)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return names


def unknown_names(text: str, names: Names, *, functions: bool = False) -> list[str]:
    """What ``text`` names that is not in the code; ``functions``: also the functions it
    names by their module (``chunks.receive``)."""
    problems = []
    for span in code_spans(text):
        if _PATH.match(span):
            if not any((where / span).is_file() for where in PATH_ROOTS):
                problems.append(f"{span}: no such module")
            continue
        dotted = _DOTTED.match(span)
        if dotted is None:
            continue
        owner, member = dotted.groups()
        if owner[0].isupper():
            if owner not in names.members:
                problems.append(f"{span}: no class {owner}")
            elif not names.has(owner, member):
                problems.append(f"{span}: {owner} has no {member}")
        elif (
            functions
            and owner in names.modules
            and not any(member in found for found in names.modules[owner])
        ):
            problems.append(f"{span}: no {member} in any module {owner}")
    return problems


def test_every_module_and_name_the_docs_give_is_in_the_code() -> None:
    names = Names()
    problems = [
        f"{doc.relative_to(ROOT)}: {problem}"
        for doc in DOCS
        for problem in unknown_names(doc.read_text(), names, functions=doc == ARCHITECTURE)
    ]
    assert problems == [], "\n".join(problems)


def test_a_name_that_is_gone_is_found() -> None:
    names = Names()
    text = (
        "`Router.start`, `Connection.finish`, `Router.gone`, `servers/calling/calls.py`,"
        " `servers/gone.py`, `NoSuch.x`, `chunks.receive`, `chunks.gone`"
    )
    assert unknown_names(text, names, functions=True) == [
        "Router.gone: Router has no gone",
        "servers/gone.py: no such module",
        "NoSuch.x: no class NoSuch",
        "chunks.gone: no gone in any module chunks",
    ]
    assert unknown_names("`chunks.gone`", names) == []


def test_the_package_map_names_every_room_of_each_wing() -> None:
    """A wing's entry under ``mcpd/`` in architecture.md's map of the packages names each
    of its rooms (``entry/``), so a reader looking for one finds where it is said."""
    block = ARCHITECTURE.read_text().split("```", 2)[1]
    entries: dict[str, str] = {}
    wing = ""
    for line in block.splitlines():
        starts = re.match(r"^  (\w+)/", line)
        if starts:
            wing = starts[1]
            entries[wing] = ""
        elif not line.startswith("  "):
            wing = ""
        if wing:
            entries[wing] += line + "\n"
    missing = [
        f"mcpd/{wing}/{room.name}/"
        for wing, text in entries.items()
        for room in sorted((ROOT / "mcpd" / wing).iterdir())
        if (room / "__init__.py").is_file() and f"{room.name}/" not in text.split("/", 1)[1]
    ]
    assert missing == [], "not in architecture.md's map: " + ", ".join(missing)
