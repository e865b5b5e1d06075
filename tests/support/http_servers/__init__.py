"""In-process HTTP test servers on h11 and trio: Streamable HTTP in either era and the old
HTTP+SSE transport."""
