"""The pins on disk: ``pins.json`` read as records and written anew, what the pin
commands are answered, and the pins as the daemon keeps them with whether they are saved."""
