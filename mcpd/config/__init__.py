"""The configuration: its model, loading TOML or JSON with variables and secrets,
and importing other hosts' configs."""
