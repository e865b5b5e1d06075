"""The stdio transport: a server run as a child process, spoken to in lines."""
