"""What reaches agents unasked: list changes, resource updates, server logs, and listens."""
