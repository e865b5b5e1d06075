"""Another host's file served as mcpd's config (``mcpd serve --config FILE.json``).

It is read as ``mcpd import`` reads it, and held to what a TOML config is held to: a
file none of whose servers can be used is refused, and so is a key mcpd would read
but for a slip of a letter (``"arg"``), as in TOML, since the server would otherwise
run without what the key says. Other notes go to the log.
"""

from __future__ import annotations

import logging

from ..tables.model import ConfigError
from .convert import import_text


def config_from_json(text: bytes, source: str) -> dict[str, object]:
    """The config data for ``mcpd serve --config FILE.json``; notes go to the log."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("", f"{source}: not UTF-8 text") from None
    imported = import_text(decoded, source)
    if imported.misspelt:
        why = [ConfigError("", f"{source}: {said}") for said in imported.misspelt]
        raise ConfigError("", f"{source}: {imported.misspelt[0]}", more=why[1:])
    if not imported.servers:
        # As the same mistakes in TOML are: a file of servers that runs none is no config.
        why = [ConfigError("", f"{source}: {note}") for note in imported.notes]
        raise ConfigError("", f"{source}: none of its servers can be used", more=why)
    log = logging.getLogger("mcpd.config")
    for note in imported.notes:
        log.warning("%s: %s", source, note)
    return {"servers": imported.servers}
