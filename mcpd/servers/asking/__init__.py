"""What passes between agents and a server besides tools/call: the requests a server
asks back during a call, those it asks of calls already ended, progress, and agents'
other requests."""
