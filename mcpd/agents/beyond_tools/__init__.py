"""What an agent asks beyond tools: prompts, completions and resources, the bounds on
them and on matching URIs, and the handlers and list-change news of every method but
the tools'."""
