"""What tests read their answers with: a module's imports and classes from source, the docs'
console transcripts, the metrics exposition, and the cost of a piece of work."""
