"""OAuth worlds for tests: authorization and protected MCP servers, in process or over HTTP,
logins, browsers that follow them, and the conformance suite's scenarios."""
