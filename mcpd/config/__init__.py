"""The configuration: its model (``model``), loading TOML or JSON with variables and
secrets (``load``, ``secrets``), and importing other hosts' configs (``importer``)."""
