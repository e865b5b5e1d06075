"""Pins: each item's definition as a person approved it, what is kept of them in memory,
and the operator's side of approving."""
