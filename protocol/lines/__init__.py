"""Bytes to lines and back: newline framing, one JSON text as one line, the text faults
a line may carry, how deep and how many values a JSON text holds told from its bytes,
and what a stdio server writes on stdout, cut into lines and sent where each goes."""
