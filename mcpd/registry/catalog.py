"""The whole table: tools (``Registry``) plus prompts and resources, kept in step.

A runner marks its server up or down, the configuration renames or removes a server:
each happens once here and reaches all three tables. Code that only knows about
tools keeps seeing a ``Registry``.
"""

from __future__ import annotations

from ..config.model import NamingConfig
from .prompts import PromptTable
from .resources import ResourceTable
from .table import Registry


class Catalog(Registry):
    def __init__(self, naming: NamingConfig) -> None:
        super().__init__(naming)
        self.prompts = PromptTable(naming)
        self.resources = ResourceTable()

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        self.prompts.set_availability(alias, available, marker)
        self.resources.set_availability(alias, available, marker)
        return super().set_availability(alias, available, marker)

    def remove(self, alias: str) -> bool:
        self.prompts.remove(alias)
        self.resources.remove(alias)
        return super().remove(alias)

    def rename(self, naming: NamingConfig) -> None:
        self.prompts.rename(naming)
        super().rename(naming)


def catalog_of(registry: Registry) -> Catalog | None:
    """The prompt and resource tables, when the registry has them (tests may give a
    runner a bare tool table)."""
    return registry if isinstance(registry, Catalog) else None
