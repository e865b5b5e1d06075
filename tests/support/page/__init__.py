"""The status page from outside: its daemon, a real browser and a scripted one, its HTTP session
and its event stream."""
