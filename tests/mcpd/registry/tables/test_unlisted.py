"""What a server's own settings name that it does not list, said by ``UnlistedNames``:
in the journal once for each list of names it sends (a list of the same names again, or
a look at the status, says nothing more), and again when the settings change."""

from __future__ import annotations

import logging

import pytest

from mcpd.config.tables.model import NamingConfig
from mcpd.config.tables.servertable import ServerConfig, ToolsConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.tables.unlisted import UnlistedNames
from tests.support.parts.routing import tool


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [r.getMessage() for r in caplog.records if "does not list" in r.getMessage()]
    caplog.clear()
    return out


def test_each_list_of_new_names_is_judged_once_and_a_setting_changed_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "mcpd.registry")
    cat = Catalog(NamingConfig())
    config = {"notes": ServerConfig(command="x", tools=ToolsConfig(allow=["serach", "read*"]))}
    unlisted = UnlistedNames(cat, config.get)
    unlisted.check("notes")
    assert unlisted.of("notes") == [] and said(caplog) == []  # nothing listed yet
    cat.update("notes", [tool("search"), tool("read")])
    unlisted.check("notes")
    assert said(caplog) == ["notes: tools.allow names serach, which notes does not list"]
    cat.update("notes", [tool("search", "another description"), tool("read")])
    unlisted.check("notes")
    assert unlisted.of("notes") == ["tools.allow names serach, which notes does not list"]
    assert said(caplog) == []  # the same names
    cat.update("notes", [tool("search"), tool("read"), tool("write")])
    unlisted.check("notes")
    assert said(caplog) == ["notes: tools.allow names serach, which notes does not list"]
    config["notes"] = ServerConfig(command="x", tools=ToolsConfig(allow=["search"]))
    unlisted.check("notes")
    assert unlisted.of("notes") == [] and said(caplog) == []
    config["notes"] = ServerConfig(command="x", tool_timeouts={"serch": 1.0})
    unlisted.check("notes")
    assert said(caplog) == ["notes: tool_timeouts names serch, which notes does not list"]
    assert unlisted.of("other") == []
