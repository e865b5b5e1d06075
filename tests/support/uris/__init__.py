"""Servers and samples of resources, templates and URIs, for the tests of what a server's URIs
reach and what agents are shown of them."""
