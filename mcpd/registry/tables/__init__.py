"""The aggregated tables of tools and prompts, kept in step with the resources as one
catalog: each server's items as curated, and what agents are shown of each."""
