"""Classes as their source shows them, to ask which of them implement an interface (a
Protocol, or an abstract base) without importing anything: bases by name, methods
with how many positional arguments they take, attributes set in the class body or on
``self``."""

from __future__ import annotations

import ast
import math


def name_of(node: ast.expr) -> str:
    """The last name of an expression (``up.transport`` -> ``transport``), if it has one."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


class ClassShape:
    """A class as its source shows it: bases, methods (with how many positional
    arguments they take) and attributes (set in its body or on ``self``)."""

    def __init__(self, name: str, where: str, bases: list[str], abstract: bool = False) -> None:
        self.name = name
        self.where = where
        self.bases = bases
        self.abstract = abstract  # an abstract base: ``abc.ABC``, or of ``abc.ABCMeta``
        self.methods: dict[str, tuple[int, float]] = {}
        self.attributes: set[str] = set()

    @classmethod
    def of(cls, node: ast.ClassDef, where: str) -> ClassShape:
        bases = [name_of(b) for b in node.bases]
        meta = [name_of(k.value) for k in node.keywords if k.arg == "metaclass"]
        shape = cls(node.name, where, bases, "ABC" in bases or meta == ["ABCMeta"])
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                if any(name_of(d) in ("property", "setter") for d in item.decorator_list):
                    shape.attributes.add(item.name)
                else:
                    args = item.args
                    positional = [*args.posonlyargs, *args.args][1:]  # without self
                    most = math.inf if args.vararg else len(positional)
                    shape.methods[item.name] = (len(positional) - len(args.defaults), most)
            elif isinstance(item, ast.AnnAssign):
                shape.attributes.add(name_of(item.target))
            elif isinstance(item, ast.Assign):
                shape.attributes |= {name_of(t) for t in item.targets}
        for sub in ast.walk(node):
            targets = (
                sub.targets
                if isinstance(sub, ast.Assign)
                else [sub.target]
                if isinstance(sub, ast.AnnAssign)
                else []
            )
            for t in targets:
                if isinstance(t, ast.Attribute) and name_of(t.value) == "self":
                    shape.attributes.add(t.attr)
        return shape

    @property
    def is_protocol(self) -> bool:
        return "Protocol" in self.bases

    @property
    def is_interface(self) -> bool:
        """A Protocol (implemented by shape) or an abstract base (by descent)."""
        return self.is_protocol or self.abstract

    def members(self) -> set[str]:
        return set(self.methods) | self.attributes


class ClassTree:
    """Every class of some modules, to ask which of them implement an interface. Bases
    are found by name, which is loose where two classes share one; a class that
    derives from an implementation is not counted as another one."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.shapes = [
            ClassShape.of(node, f"{module}.{node.name}")
            for module, source in sources.items()
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef)
        ]
        self._by_name: dict[str, list[ClassShape]] = {}
        for shape in self.shapes:
            self._by_name.setdefault(shape.name, []).append(shape)

    def ancestors(self, shape: ClassShape) -> list[ClassShape]:
        found: dict[str, ClassShape] = {}
        todo = [shape]
        while todo:
            for base in todo.pop().bases:
                for parent in self._by_name.get(base, []):
                    if parent.where not in found and parent is not shape:
                        found[parent.where] = parent
                        todo.append(parent)
        return list(found.values())

    def merged(self, shape: ClassShape) -> tuple[dict[str, tuple[int, float]], set[str]]:
        methods: dict[str, tuple[int, float]] = {}
        attributes: set[str] = set()
        for part in [*reversed(self.ancestors(shape)), shape]:
            methods.update(part.methods)
            attributes |= part.attributes
        return methods, attributes

    def implements(self, cls: ClassShape, protocol: ClassShape) -> bool:
        if any(a.name == protocol.name for a in self.ancestors(cls)):
            return True
        if not protocol.is_protocol:
            return False  # an abstract base is implemented by deriving from it
        need_methods, need_attributes = self.merged(protocol)
        have_methods, have_attributes = self.merged(cls)
        for name, (least, most) in need_methods.items():
            if name.startswith("__") and name != "__call__":
                continue
            if name in have_methods:
                can_least, can_most = have_methods[name]
                if not (can_least <= least and most <= can_most):
                    return False
            elif name not in have_attributes:  # a callable set as an attribute will do
                return False
        return need_attributes <= have_attributes | set(have_methods)

    def implementations(self, protocol: ClassShape) -> list[str]:
        """The classes that implement ``protocol``, one for each line of descent. An
        abstract base that derives from another implements none of it yet."""
        found = [c for c in self.shapes if not c.is_interface and self.implements(c, protocol)]
        return [
            c.where
            for c in found
            if not any(
                self.implements(a, protocol) for a in self.ancestors(c) if not a.is_interface
            )
        ]

    def single_implementations(self) -> dict[str, str]:
        """Interface -> its one implementation. A Protocol of ``__call__`` alone types
        a callback, which functions implement, and is left out."""
        single = {}
        for shape in self.shapes:
            if shape.is_interface and set(shape.methods) | shape.attributes != {"__call__"}:
                found = self.implementations(shape)
                if len(found) == 1:
                    single[shape.where] = found[0]
        return single
