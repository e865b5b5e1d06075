"""The Streamable HTTP transport, and the OAuth client that gets its credentials."""
