"""A call's arguments as a person is shown them: read once, then written whole or at a
glance."""
