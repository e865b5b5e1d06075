"""The pins commands: what waits for approval and approving it, the pins as a file taken
from one machine to another, and a named output file written without following links."""
