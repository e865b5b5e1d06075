"""What a config read into the model must satisfy beyond its types: its servers,
profiles, endpoints, policy, aliases and strings, each error naming its key."""
