"""The whole table: tools (``ToolTable``) plus prompts and resources, kept in step.

A runner marks its server up or down, the configuration renames or removes a server:
each happens once here and reaches all three tables. Code that only knows about
tools keeps seeing a ``ToolTable``.
"""

from __future__ import annotations

from ...config.tables.model import NamingConfig
from ..gating.gate import ListGate
from ..uris.resources import ResourceTable
from .prompts import PromptTable
from .table import ToolTable


class Catalog(ToolTable):
    """``gate``: what every list passes (one for the three tables: a server's pins,
    pending changes and findings are one set)."""

    def __init__(self, naming: NamingConfig, gate: ListGate | None = None) -> None:
        super().__init__(naming, gate)
        self.prompts = PromptTable(naming, self.gate)
        self.resources = ResourceTable(self.gate)

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        """The server marked up or down in every table; whether any of them changed."""
        prompts = self.prompts.set_availability(alias, available, marker)
        resources = self.resources.set_availability(alias, available, marker)
        return super().set_availability(alias, available, marker) or prompts or resources

    def remove(self, alias: str) -> bool:
        """The server gone from every table; whether any of them listed it."""
        prompts = self.prompts.remove(alias)
        resources = self.resources.remove(alias)
        return super().remove(alias) or prompts or resources

    def rejudge(self, alias: str) -> bool:
        """Tools, prompts and templates of the server through the gate again."""
        prompts = self.prompts.rejudge(alias)
        resources = self.resources.rejudge(alias)
        return super().rejudge(alias) or prompts or resources

    def rename(self, naming: NamingConfig) -> None:
        self.prompts.rename(naming)
        super().rename(naming)
