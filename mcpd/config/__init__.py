"""The configuration: its model (``model``, each server's table in ``servertable``),
loading TOML or JSON with variables and secrets (``load``, ``secrets``), and importing
other hosts' configs (``importer``)."""
